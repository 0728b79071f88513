"""Sparse autoencoders trained with SAELens on cached activations, as a methods-benchmark plugin (method ``sae``).

SAELens needs ``transformer-lens<4`` (it imports ``transformer_lens.HookedTransformer``, which TransformerLens 4
removed), so it cannot share the default environment; this file is a plugin, imported only where SAELens is:

    .venv-tl3/bin/pip install -c constraints.txt "sae-lens>=6"        # the TransformerLens 3.9 environment
    .venv-tl3/bin/ictd-interp methods-benchmark --out DIR --plugin analyses/methods_benchmark/sae_plugin.py \\
        --methods sae,linear-probe

(``.venv-tl3`` is what ``tests/slow/test_transformer_lens_3.py`` builds.) For every variable and every site where it
lies exactly, a SAELens ``StandardTrainingSAE`` (ReLU latents, ``SAE_WIDTH × d_model`` of them, L1 penalty
``SAE_L1``) is trained on the residual stream at that site over the fit prompts (every position a sample), with
SAELens's own loss and ``SAE_STEPS`` full-batch Adam steps. The SAE's answer for the variable is the latent whose
activation correlates most with it (|Pearson r| over the samples, the matching of the mean-correlation score); the
direction scored is that latent's decoder row (angle to the truth, held-out R² of the readout along it,
interchange accuracy: ``evaluate.score_directions``). ``sae-features`` gives the same SAEs, at the sites of a
superposed case's features, as a feature method: every latent scored by MCC against the planted sparse units
(``evaluate.score_features``).
"""

from __future__ import annotations

import torch
from sae_lens import StandardTrainingSAE, StandardTrainingSAEConfig
from sae_lens.saes.sae import TrainStepInput

from ictd_interp.analyses.methods_benchmark.cases import Problem, residual_sites
from ictd_interp.analyses.methods_benchmark.methods import (
    DICTIONARY_WIDTH,
    DIRECTIONS,
    FEATURES,
    DirectionOutput,
    Encoder,
    FeatureOutput,
    Method,
    register_method,
)
from ictd_interp.analyses.methods_benchmark.scores import correlations
from ictd_interp.analyses.metrics.draws import case_seed
from ictd_interp.analyses.metrics.site_probes import residual_stack

SAE_WIDTH = DICTIONARY_WIDTH  # as wide as the random dictionary, its chance baseline
SAE_L1, SAE_STEPS, SAE_LR = 0.1, 2000, 3e-3  # L1 and steps: the best of a small sweep (docs)


def train_sae(acts: torch.Tensor, seed: int) -> StandardTrainingSAE:
    """A SAELens standard SAE fitted to ``acts [samples, d]`` (float32, full batch, seeded)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        sae = StandardTrainingSAE(
            StandardTrainingSAEConfig(
                d_in=acts.shape[-1],
                d_sae=SAE_WIDTH * acts.shape[-1],
                l1_coefficient=SAE_L1,
                dtype="float32",
                device="cpu",
            )
        )
    x = acts.float()
    opt = torch.optim.Adam(sae.parameters(), lr=SAE_LR)
    for step in range(SAE_STEPS):
        out = sae.training_forward_pass(
            TrainStepInput(
                sae_in=x,
                coefficients={"l1": SAE_L1},
                dead_neuron_mask=None,
                n_training_steps=step,
                is_logging_step=False,
            )
        )
        opt.zero_grad()
        out.loss.backward()
        opt.step()
    return sae.eval()


_TRAINED: dict[tuple, StandardTrainingSAE] = {}  # one case's SAEs, by site: sae and sae-features share them


def site_sae(case: Problem, resid: torch.Tensor, s: int) -> StandardTrainingSAE:
    """The SAE of site ``s`` of ``case`` (``resid``: ``residual_stack`` on its fit prompts), trained once per case."""
    key = (case.name, len(case.fit), case.seed, s)
    if not any(k[:3] == key[:3] for k in _TRAINED):
        _TRAINED.clear()  # another case: keep only the current one's
    if key not in _TRAINED:
        _TRAINED[key] = train_sae(resid[s].reshape(-1, resid.shape[-1]), case_seed(case.seed, s))
    return _TRAINED[key]


def sae(case: Problem) -> DirectionOutput:
    resid = residual_stack(case.model, case.fit.prompt)
    values, sites, out = case.fit_values, residual_sites(case.model), DirectionOutput()
    for s, site in enumerate(sites):
        needed = [name for name in values if site in case.variable_sites[name]]
        if not needed:
            continue
        model = site_sae(case, resid, s)
        with torch.no_grad():
            latents = model.encode(resid[s].reshape(-1, resid.shape[-1]).float())
        for name in needed:  # the latent most correlated with the variable
            k = int(correlations(values[name][s].reshape(-1, 1), latents)[0].argmax())
            out.directions[(name, site)] = model.W_dec[k].detach().double().clone()
    return out


def sae_encoder(model: StandardTrainingSAE, acts: torch.Tensor) -> Encoder:
    """A standard SAE's encoder as data, ``relu((x - b_dec) @ W_enc + b_enc)``, checked against SAELens's own
    ``encode`` on the fit activations (a version that encodes otherwise is refused, not scored wrongly)."""
    center = model.b_dec.detach().double().clone() if getattr(model.cfg, "apply_b_dec_to_input", True) else None
    encoder = Encoder(model.W_enc.detach().double().T.clone(), model.b_enc.detach().double().clone(), center, "relu")
    with torch.no_grad():
        theirs = model.encode(acts.float()).double()
    if not torch.allclose(encoder(acts), theirs, atol=1e-4, rtol=1e-4):
        raise ValueError("sae-features: SAELens's encode is not relu((x - b_dec) W_enc + b_enc) in this version")
    return encoder


def sae_features(case: Problem) -> FeatureOutput:
    """One SAE per site where a superposed case's features lie: its latents and decoder rows, scored by MCC."""
    resid, sites, out = residual_stack(case.model, case.fit.prompt), residual_sites(case.model), FeatureOutput()
    for site in case.feature_sites:
        model = site_sae(case, resid, sites.index(site))
        out.encoders[site] = sae_encoder(model, resid[sites.index(site)].reshape(-1, resid.shape[-1]))
        out.decoders[site] = model.W_dec.detach().double().clone()
    return out


register_method(
    Method(
        "sae-features",
        FEATURES,
        sae_features,
        f"SAELens standard SAE per site ({SAE_WIDTH}× wide, L1 {SAE_L1}): its latents as features",
    )
)
register_method(
    Method(
        "sae",
        DIRECTIONS,
        sae,
        f"SAELens standard SAE per site ({SAE_WIDTH}× wide, L1 {SAE_L1}, "
        f"{SAE_STEPS} steps): the latent most correlated with the variable",
    )
)
