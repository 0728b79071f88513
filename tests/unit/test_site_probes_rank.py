"""A probe on a rank-deficient float32 site reads the site's real directions, not its rounding noise."""

import torch

from ictd_interp.analyses.metrics.site_probes import fit_probes


def test_a_rank_deficient_float32_site_is_fitted_on_its_directions():
    gen = torch.Generator().manual_seed(0)
    basis = torch.randn(3, 16, generator=gen, dtype=torch.float64)  # a rank-3 site in 16 dimensions
    coords = torch.randn(1, 40, 20, 3, generator=gen, dtype=torch.float64)
    site = (coords @ basis).float().double()  # computed in float32: rounding noise fills the other 13 directions
    exact_site = coords @ basis
    target = coords[..., 0] * 2.0 - coords[..., 1] + 0.5 + 0.3 * coords[..., 2] ** 2  # not all linear: a residual
    noisy = fit_probes(site, target, "t", source_dtype=torch.float64)  # as if float64: noise taken for directions
    fitted = fit_probes(site, target, "t", source_dtype=torch.float32)
    assert fitted.rank == (4,) and noisy.rank[0] > 4  # 3 directions + the bias
    reference = fit_probes(exact_site, target, "t")  # the same fit on the site without rounding
    assert (fitted.weights - reference.weights).abs().max() < 1e-4 and reference.rank == (4,)
    assert noisy.weights.norm() > 1000 * fitted.weights.norm()  # the noise fit explodes
    assert (fitted.predict(site) - reference.predict(exact_site)).abs().max() < 1e-4
