"""Reading the TD circuit in the standard architecture: θ*'s circuit written into a standard block
(``standard_theta_star``) against the stylised model, value and quantity probes, head kernels, signatures and
the report's verdict (float64, stated tolerances)."""

import pytest
import torch

from ictd_interp.analyses.metrics.algorithm_id import identify_from_values, identify_layers
from ictd_interp.analyses.metrics.heads import head_kernels, head_signatures
from ictd_interp.analyses.metrics.site_probes import (
    probed_values,
    quantity_probes,
    quantity_r2,
    residual_stack,
    value_probes,
)
from ictd_interp.analyses.reports.standard_words import verdict
from ictd_interp.hooks.ablation import ablate_target_path
from ictd_interp.models.standard.theta_star import standard_theta_star
from ictd_interp.reference.metrics import kernel_diagonality
from tests.conftest import make_standard, make_star, make_tasks

TOL = 1e-10


def test_meets_the_stylised_model_with_its_shift_ablated():
    """TD without bootstrapping, computed by both families: equal layer by layer in float64."""
    star, model, tasks = make_star(n_layers=3), standard_theta_star(make_star(n_layers=3)), make_tasks()
    with star.hooks(fwd_hooks=ablate_target_path(star)):
        ablated, ref = star.run_with_cache(tasks.prompt)
    values, cache = model.run_with_cache(tasks.prompt)
    assert (values - ablated).abs().max() <= TOL
    for l in range(3):
        assert (cache["pattern", l] - ref["pattern", l]).abs().max() <= TOL
        assert (
            cache["resid_post", l][..., star.layout.current] - ref["resid_mid", l][..., star.layout.current]
        ).abs().max() <= TOL
    assert (values - star(tasks.prompt)).abs().max() > 1e-2  # bootstrapping does change the answer


def test_value_probes_recover_the_stored_row_on_theta_star():
    star, fit, held_out = make_star(n_layers=3), make_tasks(n_tasks=32, seed=1), make_tasks(n_tasks=8, seed=2)
    stored = value_probes(star, fit, "stored")
    rows = residual_stack(star, held_out.prompt)[..., star.layout.current]
    assert (probed_values(star, stored, held_out) - rows).abs().max() <= TOL
    e_current = torch.zeros(star.cfg.d_model, dtype=torch.float64)
    e_current[star.layout.current] = 1.0
    for site in range(1, 4):
        assert (stored.weights[site] - e_current).abs().max() <= 1e-8
    output = value_probes(star, fit, "output")  # tuned-lens target: exact at the last site
    assert (probed_values(star, output, held_out)[-1] - star(held_out.prompt)).abs().max() <= TOL
    with pytest.raises(ValueError, match="stored"):
        value_probes(make_standard(), fit, "stored")


def test_probed_identification_equals_the_row_identification():
    star, tasks = make_star(n_layers=3), make_tasks(n_tasks=16)
    probed = identify_from_values(probed_values(star, value_probes(star, tasks, "stored"), tasks), tasks)
    rows = identify_layers(star, tasks)
    for a, b in zip(probed, rows):
        assert a.step == pytest.approx(b.step, abs=1e-6)
        assert a.effective_discount == pytest.approx(b.effective_discount or 0, abs=1e-6) or b.b is None
    assert rows[1].effective_discount == pytest.approx(0.9, abs=1e-6)


def test_reward_is_linearly_present_at_every_site_of_theta_star():
    star = make_star(n_layers=2)
    r2 = quantity_r2(star, quantity_probes(star, make_tasks(n_tasks=32, seed=1)), make_tasks(n_tasks=8, seed=2))
    assert all(v == pytest.approx(1.0, abs=1e-10) for v in r2["reward"])
    assert r2["v_current"][0] < 0.99  # site 0 holds no values: only what the features predict


def test_head_kernels_theta_star_and_uniform_attention():
    star, tasks = make_star(n_layers=2), make_tasks()
    rows = head_kernels(star, tasks)
    assert all(r.td_kernel_correlation == pytest.approx(1.0, abs=1e-12) for r in rows)
    _, cache = star.run_with_cache(tasks.prompt)
    diag = kernel_diagonality(cache["pattern", 0][:, 0], tasks.states, tasks.mrp.n_states).mean().item()
    assert rows[0].diagonality == pytest.approx(diag, abs=1e-12)
    uniform = make_standard(n_heads=1)  # W_Q = 0: every target spreads its attention evenly over the sources
    with torch.no_grad():
        uniform.blocks[0].attn.W_Q.zero_()
    row = head_kernels(uniform, tasks)[0]
    assert row.td_kernel_correlation == 0.0
    # by hand: under even attention a state's own mass is the share of the 12 sources in that state,
    # averaged over the states the prompt visits
    per_task = []
    for states in tasks.states.tolist():
        per_task.append(sum(states[:-1].count(s) / 12 for s in set(states)) / len(set(states)))
    assert row.diagonality == pytest.approx(sum(per_task) / len(per_task), abs=1e-12)


def test_signature_is_td_on_theta_star_in_both_families():
    tasks, star, embedded = make_tasks(), make_star(n_layers=3), standard_theta_star(make_star(n_layers=3))
    rows = {}
    for name in ("reward", "v_next", "v_current"):
        rows[name] = torch.zeros(6, dtype=torch.float64)
    rows["reward"][star.layout.reward], rows["v_next"][star.layout.target] = 1.0, 1.0
    rows["v_current"][star.layout.current] = 1.0
    for model in (star, embedded):
        for layer in (0, 2):
            (sig,) = head_signatures(model, tasks, layer, rows, rows["v_current"])
            assert sig.normalised == pytest.approx([1.0, 1.0, -1.0], abs=1e-12) and sig.matches_td
            assert sig.raw[0] == pytest.approx(13.0, abs=1e-9)  # 13 positions x pattern rows summing to 1


def test_verdict_sentences():
    from ictd_interp.analyses.metrics.algorithm_id import LayerReading
    from ictd_interp.analyses.metrics.heads import HeadKernel, Signature
    from ictd_interp.analyses.summary.sections import Algorithm, Circuit

    fit = dict(
        source="fit", step=1.0, b=0.9, c=-1.0, effective_discount=0.9, current_weight=-1.0, beta=1.0, identifiable=True
    )
    alg = Algorithm(
        layers=[
            LayerReading(layer=0, in_family=True, fve=0.97, **fit),
            LayerReading(layer=1, in_family=False, fve=0.3, **fit),
        ]
    )
    circuit = Circuit(
        max_td_kernel_correlation=0.8,
        max_tabular_kernel_correlation=0.0,
        heads=[HeadKernel(layer=0, head=1, td_kernel_correlation=0.8, diagonality=0.5)],
        signatures=[Signature(layer=0, head=1, raw=[1, 0.5, -0.7], normalised=[1, 0.5, -0.7], matches_td=True)],
        layer_signatures=[Signature(layer=0, raw=[1, 1, 1], normalised=[1, 1, 1], matches_td=False)],
    )
    assert verdict(circuit, alg).startswith("Yes, in part: layer 0 head 1")
    circuit.signatures[0].matches_td = False
    assert "no TD-like head (layer 0), nor its layer's whole update, moves the value" in verdict(circuit, alg)
    assert "at most 97%" in verdict(circuit, alg) and "cannot be read" not in verdict(circuit, alg)
    circuit.layer_signatures.append(Signature(layer=1, raw=[1, 1, -1], normalised=[1, 1, -1], matches_td=True))
    circuit.layer_signatures.append(Signature(layer=2, raw=[1, 1, 1], normalised=[None] * 3, matches_td=False))
    assert (
        "the whole update of layer 1 has TD's signs, with no TD-like head in it; at layer 2 the signs cannot be read"
    ) in verdict(circuit, alg)
    del circuit.layer_signatures[1:]
    circuit.heads[0].tabular_kernel_correlation = 0.95
    assert "correlation 0.95 with the tabular kernel, 0.80 with θ*'s softmax kernel" in verdict(circuit, alg)
    circuit.layer_signatures[0].matches_td = True  # the head's layer moves it, through its MLP
    assert verdict(circuit, alg).startswith("Yes, in part")
    circuit.layer_signatures[0].matches_td = False
    circuit.heads[0].td_kernel_correlation = 0.2
    assert verdict(circuit, alg).startswith("No TD circuit found")


def test_tabular_kernel_correlation_is_one_for_a_same_state_head():
    tasks = make_tasks()
    from ictd_interp.analyses.metrics.heads import correlation, tabular_kernel

    K = tabular_kernel(tasks)
    assert torch.allclose(K.sum(-1), torch.ones(4, 13, dtype=torch.float64), atol=1e-12)
    s = tasks.states
    assert K[0, 3, 0] == ((s[0, :-1] == s[0, 3]).sum() > 0) * (s[0, 0] == s[0, 3]) / max(
        int((s[0, :-1] == s[0, 3]).sum()), 1
    )
    assert correlation(K, K) == pytest.approx(1.0, abs=1e-12)


def test_layer_signature_is_td_on_theta_star_and_sees_through_an_mlp():
    from ictd_interp.analyses.metrics.heads import layer_signature

    tasks, star = make_tasks(), make_star(n_layers=3)
    rows = {name: torch.zeros(6, dtype=torch.float64) for name in ("reward", "v_next", "v_current")}
    rows["reward"][star.layout.reward], rows["v_next"][star.layout.target] = 1.0, 1.0
    rows["v_current"][star.layout.current] = 1.0
    for layer in (0, 2):
        sig = layer_signature(star, tasks, layer, rows, rows["v_current"], rows["v_current"])
        assert sig.raw == pytest.approx([13.0, 13.0, -13.0], abs=1e-9) and sig.matches_td
    # a standard model whose update flows only through its MLP: the head's direct effect on the read-out
    # is zero, the layer's update is not
    model = make_standard(d_model=6, n_heads=1, n_layers=1, d_mlp=4, layer_norm=False)
    with torch.no_grad():
        model.blocks[0].mlp.W_out[:, star.layout.current] = 0.0
        model.blocks[0].attn.W_O[..., star.layout.current] = 0.0
        model.blocks[0].mlp.W_out[0, star.layout.current] = 1.0
    (head,) = head_signatures(model, tasks, 0, rows, rows["v_current"])
    assert head.raw == [0.0, 0.0, 0.0]
    whole = layer_signature(model, tasks, 0, rows, rows["v_current"], rows["v_current"])
    assert any(abs(g) > 1e-6 for g in whole.raw)


def test_signatures_perturb_along_the_dual_basis_and_nearly_dependent_probes_are_not_read():
    """Each dual direction moves one probe's reading by 1 and the others' by 0 (to rounding), however close the
    probes lie; above condition number 50 the three cannot be separated and the whole signature is n/a."""
    from ictd_interp.analyses.metrics.heads import _signature_row, dual_basis, readable

    e = torch.eye(3, dtype=torch.float64)
    close = {"reward": e[0], "v_next": e[1], "v_current": e[1] + 0.2 * e[2]}  # cos 0.981: separable
    dual, condition = dual_basis(close)
    units = torch.stack([v / v.norm() for v in close.values()])
    assert (dual @ units.T - torch.eye(3, dtype=torch.float64)).abs().max() < 1e-12 and condition < 50
    assert readable(close)
    nearly = {"reward": e[0], "v_next": e[1], "v_current": e[1] + 0.01 * e[2]}  # cos 0.99995
    assert dual_basis(nearly)[1] > 50 and not readable(nearly)
    hidden = _signature_row([2.0, 1.0, -1.0], layer=0, read=False)
    assert hidden.normalised == [None, None, None] and not hidden.matches_td
    read = _signature_row([2.0, 1.0, -1.0], layer=0)
    assert read.normalised == [1.0, 0.5, -0.5] and read.matches_td
