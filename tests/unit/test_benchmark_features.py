"""Superposed features in the methods benchmark: the planted case's truth, the MCC worked by hand, the scoring
of a feature method against an oracle and a shuffled oracle, the PCA baseline, and (where SAELens is installed:
the TransformerLens 3.9 environment) a planted one-feature SAE case and the SAE plugin."""

import pytest
import torch

from ictd_interp.analyses.methods_benchmark.case_specs import CASES
from ictd_interp.analyses.methods_benchmark.cases import build_case, feature_values, problem_of, residual_sites
from ictd_interp.analyses.methods_benchmark.evaluate import score_features, score_method
from ictd_interp.analyses.methods_benchmark.methods import METHODS, Encoder, FeatureOutput
from ictd_interp.analyses.methods_benchmark.scores import matched_correlations
from ictd_interp.analyses.metrics.site_probes import residual_stack


@pytest.fixture(scope="module")
def superposed():
    return build_case(CASES["superposed"], 0)


def test_the_mcc_by_hand():
    truth = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [2.0, 0.0]])
    noise = torch.tensor([[0.3], [-1.0], [0.2], [0.5]])
    latents = torch.cat([3 * truth[:, [1]], noise, -2 * truth[:, [0]]], dim=1)  # permuted, scaled, one sign flipped
    assert matched_correlations(truth, latents) == (pytest.approx(1.0), {0: 2, 1: 0})
    assert matched_correlations(truth, latents[:, [2]])[0] == pytest.approx(0.5)  # the second feature unmatched
    assert matched_correlations(truth, torch.ones(4, 3))[0] == 0.0  # constant latents correlate 0


def test_the_planted_units_are_sparse_and_superposed_exactly(superposed):
    """After block l the residual's junk part is exactly the sum of the units' activations times their write
    rows (18 units in 3 dimensions after block 2), each unit active on about 10 % of held-out positions."""
    case, junk = superposed, slice(case_width := superposed.spec.d_features + 3, None)
    resid = residual_stack(case.model, case.held_out.prompt)
    sites, features = residual_sites(case.model), feature_values(case, case.held_out)
    writes = torch.cat([b.mlp.W_out.detach() for b in case.model.blocks])  # rotated write rows
    assert case_width == 6 and case.truth.features[sites[3]].shape == (18, 9)
    for l, site in enumerate(sites[1:]):
        acts = features[site]
        unrotated = resid[l + 1].reshape(-1, 9) @ case.rotation.T  # back to the planted basis
        assert (unrotated[:, junk] - (acts @ writes[: acts.shape[1]] @ case.rotation.T)[:, junk]).abs().max() < 1e-10
        share = float((acts > 0).double().mean())
        assert 0.05 < share < 0.2


class Given(Encoder):
    """The scorer's test double: latents given in advance (the planted units are no function of one site's
    residual), through ``Encoder``'s interface."""

    def __init__(self, latents: torch.Tensor):
        super().__init__(torch.zeros(latents.shape[1], 9, dtype=torch.float64))
        self.latents = latents

    def __call__(self, x):
        return self.latents


def test_an_oracle_scores_one_and_a_shuffled_oracle_near_zero(superposed):
    case, truth = superposed, feature_values(superposed, superposed.held_out)
    perm = torch.randperm(truth[next(iter(truth))].shape[0], generator=torch.Generator().manual_seed(0))
    oracle, shuffled = FeatureOutput(), FeatureOutput()
    for site, acts in truth.items():
        oracle.encoders[site] = Given(acts)
        shuffled.encoders[site] = Given(acts[perm])
        oracle.decoders[site] = shuffled.decoders[site] = case.truth.features[site]
    exact = score_features(case, oracle)
    assert exact.mcc == pytest.approx(1.0) and exact.cosine == pytest.approx(1.0)
    assert score_features(case, shuffled).mcc < 0.3


def test_pca_cannot_separate_more_units_than_dimensions(superposed):
    scores = score_method(METHODS["pca"], superposed)
    assert scores.latents == 9 and scores.features == 18
    assert scores.mcc < 0.6 and scores.per_site[-1] <= 9 / 18 + 1e-9  # at most 9 of 18 units matched
    assert score_method(METHODS["pca"], build_case(CASES["rotated"], 0)) is None  # no features planted


def test_the_random_dictionary_is_as_wide_as_the_sae_and_fires_as_often_as_the_units(superposed):
    """The chance baseline: 4 x 9 = 36 unit directions per site, each latent active on the planted units' designed
    share (10 %) of the fit positions: a quantile, so never more than that to one position, and less only where
    positions with equal residuals tie at the threshold (within 1 % here); the same on a second call (seeded)."""
    case = superposed
    out, again = (METHODS["random-dictionary"].run(problem_of(case)) for _ in range(2))
    resid, sites = residual_stack(case.model, case.fit.prompt), residual_sites(case.model)
    assert list(out.decoders) == list(case.truth.features)
    for site, decoder in out.decoders.items():
        assert decoder.shape == (36, 9) and torch.allclose(decoder.norm(dim=-1), torch.ones(36, dtype=decoder.dtype))
        acts = resid[sites.index(site)].reshape(-1, 9)
        rate = (out.encoders[site](acts) > 0).double().mean(0)
        assert rate.max() <= case.spec.mlp_active + 1.0 / acts.shape[0] and rate.min() >= case.spec.mlp_active - 0.01
        assert torch.equal(decoder, again.decoders[site])
        assert torch.equal(out.encoders[site](acts), again.encoders[site](acts))
    scores = score_method(METHODS["random-dictionary"], case)
    assert scores.latents == 36 and scores.features == 18


def test_a_plugin_loaded_twice_registers_once_and_a_different_method_is_still_refused(tmp_path):
    import importlib.util

    from ictd_interp.analyses.methods_benchmark.methods import Method, register_method
    from ictd_interp.analyses.methods_benchmark.plugins import load_plugin

    path = tmp_path / "twice.py"
    path.write_text(
        "from ictd_interp.analyses.methods_benchmark.methods import FeatureOutput, Method, register_method\n"
        "def twice(case):\n    return FeatureOutput()\n"
        "register_method(Method('twice-loaded', 'features', twice, 'a test plugin'))\n"
    )
    load_plugin(path)
    spec = importlib.util.spec_from_file_location("twice_as_a_module", path)  # the same file under another name
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert METHODS["twice-loaded"].summary == "a test plugin"
    with pytest.raises(ValueError, match="already registered"):
        register_method(Method("twice-loaded", "features", lambda case: FeatureOutput(), "a test plugin"))
    del METHODS["twice-loaded"]


def test_an_encoder_is_data_and_code_is_refused_named(superposed):
    """``Encoder`` computes ``activation((x - center) W^T + b)`` (worked by hand), travels as tensors through the
    harness's ``as_data``/``from_data``, and a feature output whose encoder is a function fails its cell, named."""
    from ictd_interp.analyses.methods_benchmark.evaluate import MethodFailed, score_output
    from ictd_interp.analyses.methods_benchmark.isolation import as_data, from_data

    e = Encoder(torch.tensor([[1.0, -1.0], [0.0, 2.0]]), torch.tensor([0.5, -3.0]), torch.tensor([1.0, 1.0]), "relu")
    assert e(torch.tensor([[3.0, 2.0]])).tolist() == [[1.5, 0.0]]  # (2, 1): 2 - 1 + 0.5 = 1.5; relu(2 - 3) = 0
    back = from_data(as_data(FeatureOutput({"s": e}, {"s": torch.eye(2)})))
    assert isinstance(back.encoders["s"], Encoder) and torch.equal(back.encoders["s"].weight, e.weight)
    with pytest.raises(ValueError, match="encoder activation"):
        Encoder(torch.eye(2), activation="tanh")
    pca = METHODS["pca"].run(problem_of(superposed))
    as_code = FeatureOutput(decoders=pca.decoders)
    as_code.encoders.update({s: (lambda x, f=f: f(x)) for s, f in pca.encoders.items()})  # a plugin's closures
    for output in (as_code, from_data(as_data(as_code))):  # alone, and after the harness
        with pytest.raises(MethodFailed, match="not Encoder data"):
            score_output("pca-as-code", "features", superposed, output)
    assert score_output("pca", "features", superposed, from_data(as_data(pca))).mcc == pytest.approx(
        score_output("pca", "features", superposed, pca).mcc
    )
