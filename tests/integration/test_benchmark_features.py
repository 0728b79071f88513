"""Superposed features in the methods benchmark: the planted case's truth, the MCC worked by hand, the scoring
of a feature method against an oracle and a shuffled oracle, the PCA baseline, and (where SAELens is installed:
the TransformerLens 3.9 environment) a planted one-feature SAE case and the SAE plugin."""

import pytest
import torch

from ictd_interp.analyses.methods_benchmark.case_specs import CASES
from ictd_interp.analyses.methods_benchmark.cases import build_case
from ictd_interp.analyses.methods_benchmark.evaluate import score_method
from ictd_interp.analyses.methods_benchmark.methods import METHODS
from ictd_interp.analyses.methods_benchmark.scores import matched_correlations


def test_a_planted_one_feature_sae_case():
    pytest.importorskip("sae_lens")
    from ictd_interp.analyses.methods_benchmark.sae_plugin import train_sae

    gen = torch.Generator().manual_seed(0)
    direction = torch.nn.functional.normalize(torch.randn(4, generator=gen, dtype=torch.float64), dim=0)
    on = torch.rand(2000, generator=gen, dtype=torch.float64) < 0.1
    feature = on * (1 + torch.rand(2000, generator=gen, dtype=torch.float64))
    acts = feature[:, None] * direction + 0.01 * torch.randn(2000, 4, generator=gen, dtype=torch.float64)
    sae = train_sae(acts, seed=0)
    with torch.no_grad():
        latents = sae.encode(acts.float()).double()
    mcc, match = matched_correlations(feature[:, None], latents)
    assert mcc > 0.95
    decoder = sae.W_dec[match[0]].detach().double()
    assert float((decoder @ direction).abs() / decoder.norm()) > 0.95


@pytest.fixture(scope="module")
def superposed():
    return build_case(CASES["superposed"], 0)


def test_the_sae_plugin_beats_pca_on_the_superposed_case(superposed):
    pytest.importorskip("sae_lens")
    import ictd_interp.analyses.methods_benchmark.sae_plugin  # noqa: F401 (registers sae and sae-features)

    sae, pca = score_method(METHODS["sae-features"], superposed), score_method(METHODS["pca"], superposed)
    assert sae.latents == 36 and sae.mcc > pca.mcc + 0.2
