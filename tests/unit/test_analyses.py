from types import SimpleNamespace

import numpy as np
import pytest
import torch

from ictd_interp import HookedICTDTransformer
from ictd_interp.analyses.figures import plots as figures
from ictd_interp.analyses.figures.style import series_colours
from ictd_interp.analyses.metrics.convergence import GeometricFit, errors_by_context, errors_by_depth, fit_geometric
from ictd_interp.analyses.metrics.diagonality import (
    kernel_diagonality,
    model_margin,
    onehot_margin,
    self_attention_mass,
    state_kernels,
)
from ictd_interp.analyses.metrics.heads import Signature
from ictd_interp.analyses.metrics.probes import circuit_cosines, prediction_gap, sensitivity_cosine, weight_cosines
from ictd_interp.reference.metrics import value_signature
from ictd_interp.tasks.sampling import sample_tasks
from tests.conftest import make_star, make_tasks

STATES = torch.tensor([[0, 1, 0]])
PATTERN = torch.tensor([[[0.8, 0.2, 0.0], [0.3, 0.7, 0.0], [0.8, 0.2, 0.0]]], dtype=torch.float64)


def test_diagonality_of_a_hand_made_two_state_context():
    assert kernel_diagonality(PATTERN, STATES, 2).item() == pytest.approx((0.8 + 0.7) / 2)
    assert self_attention_mass(PATTERN, STATES).item() == pytest.approx((0.8 + 0.7 + 0.8) / 3)
    M, P = state_kernels(PATTERN, STATES, 2)
    assert torch.allclose(M[0], torch.tensor([[0.8, 0.2], [0.3, 0.7]], dtype=torch.float64))
    # sources S_0=0 -> S_1=1 and S_1=1 -> S_2=0: P^(s, s') moves each source's weight to its successor
    assert torch.allclose(P[0], torch.tensor([[0.2, 0.8], [0.7, 0.3]], dtype=torch.float64))


def test_theta_star_scores_exactly_one():
    model = make_star(n_layers=3)
    cos = weight_cosines(model, model.cfg)
    assert cos["A"] == pytest.approx([1.0] * 3, abs=1e-15) and cos["V"] == pytest.approx([1.0] * 3, abs=1e-15)
    circuits = circuit_cosines(model)
    assert np.allclose(circuits["QK"], 1.0) and np.allclose(circuits["OV"], 1.0)
    sig = value_signature(model, model.cfg)
    assert sig[0]["normalised"] == [1.0, None, None] and sig[0]["identifiable"] == [True, False, False]
    assert sig[1]["normalised"] == [1.0, 1.0, -1.0] and all(s["matches"] for s in sig)
    assert all(row["matches"] for row in value_signature(model, model.cfg))
    tied = make_star(n_layers=3, tied=True)
    assert value_signature(tied, tied.cfg)[0]["normalised"] == [1.0, 1.0, -1.0]
    tasks = make_tasks()
    assert prediction_gap(model, tasks)["rms_gap_to_theta_star"] == 0.0
    assert sensitivity_cosine(model, tasks) == pytest.approx(1.0, abs=1e-12)


def test_activation_cosines_in_chunks_equal_the_one_pass_cosines(monkeypatch):
    """A cache too large for ``CACHE_BYTES`` is summed over chunks of tasks: the same cosines to float rounding (a
    perturbed model, so they are not all 1), and a wrong sum (one chunk only) would be caught."""
    from ictd_interp.analyses.metrics import probes

    model, tasks = make_star(n_layers=2, dtype="float64"), make_tasks(n_tasks=6, n=8)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.V.add_(0.3 * torch.randn(block.attn.V.shape, generator=torch.Generator().manual_seed(0)))
    whole = probes.activation_cosines(model, tasks)
    assert min(whole.values()) < 0.999
    monkeypatch.setattr(probes, "CACHE_BYTES", 1)  # one task a chunk
    chunked = probes.activation_cosines(model, tasks)
    assert chunked.keys() == whole.keys()
    assert all(abs(chunked[k] - whole[k]) < 1e-12 for k in whole)
    first = probes.activation_cosines(model, tasks[:1])
    assert any(abs(first[k] - whole[k]) > 1e-6 for k in whole)


def test_query_sensitivity_in_chunks_equals_one_pass(monkeypatch):
    """A graph too large for ``GRAD_BYTES`` goes through in chunks of tasks: the same gradients (float64, 1e-12) in
    the same task order, on a perturbed model whose tasks' gradients differ."""
    from ictd_interp.analyses.metrics import probes

    model, tasks = make_star(n_layers=2, dtype="float64"), make_tasks(n_tasks=5, n=8)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.A.add_(0.3 * torch.randn(block.attn.A.shape, generator=torch.Generator().manual_seed(1)))
    prompt = tasks.prompt.double()
    whole = probes.query_sensitivity(model, prompt)
    monkeypatch.setattr(probes, "GRAD_BYTES", 1)  # one task a chunk
    chunked = probes.query_sensitivity(model, prompt)
    assert chunked.shape == whole.shape == (5, model.cfg.d_features)
    assert float((chunked - whole).abs().max()) <= 1e-12 * float(whole.abs().max())
    assert float((whole[1:] - whole[:-1]).abs().max()) > 1e-3  # the tasks' rows differ: an order mix-up would show


def test_unidentifiable_entries_are_not_scored_and_do_not_change_the_output():
    model = make_star(n_layers=2)
    tasks = make_tasks()
    before_out, before_cos = model(tasks.prompt), weight_cosines(model, model.cfg)
    with torch.no_grad():  # layer 0 reads value rows that are still zero: these entries are inert
        model.blocks[0].attn.V[0, -1, -1] = 7.0
        model.blocks[0].attn.V[0, -1, -2] = -3.0
    assert torch.equal(model(tasks.prompt), before_out)
    assert weight_cosines(model, model.cfg) == before_cos
    assert value_signature(model, model.cfg)[0]["normalised"] == [1.0, None, None]


def test_weight_metrics_are_scale_invariant():
    model = make_star(n_layers=2)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.V.mul_(2.5)
            block.attn.A.mul_(0.3)
    cos = weight_cosines(model, model.cfg)
    assert cos["V"] == pytest.approx([1.0, 1.0]) and cos["A"] == pytest.approx([1.0, 1.0])
    assert value_signature(model, model.cfg)[1]["normalised"] == pytest.approx([1.0, 1.0, -1.0])


def test_large_onehot_scale_is_diagonal_and_margin_matches_closed_form():
    tasks = sample_tasks(3, 5, 5, 60, 0.9, feature_kind="onehot", feature_scale=4.0, seed=0)
    model = make_star(d_features=5)
    _, cache = model.run_with_cache(tasks.prompt)
    assert kernel_diagonality(cache["pattern", 0][:, 0], tasks.states, 5).min().item() > 1 - 1e-5
    C = model_margin(model, tasks)
    for b in range(3):
        assert C[b].item() == pytest.approx(onehot_margin(tasks.mrp.mu_pi[b], 4.0, 0.9), abs=1e-12)
    small = sample_tasks(3, 5, 5, 60, 0.9, feature_kind="onehot", feature_scale=0.5, seed=0)
    assert (model_margin(model, small) < 0).all()


def test_convergence_helpers():
    L = np.arange(20)
    fit = fit_geometric(3 * 0.7**L + 0.1)
    assert fit.rate == pytest.approx(0.7, abs=1e-3) and fit.floor == pytest.approx(0.1, abs=1e-3)
    tasks = make_tasks(n=30)
    errors = errors_by_depth(make_star(n_layers=4), tasks)
    assert errors.shape == (5, 4)
    assert torch.allclose(errors[0], tasks.v_true.abs().amax(-1))
    by_n = errors_by_context(make_star(n_layers=4), tasks, [5, 30])
    assert torch.allclose(by_n[1], errors[-1])
    with pytest.raises(ValueError, match="lengths"):
        errors_by_context(make_star(), tasks, [31])


def test_figures_have_titles_and_labels():
    figs = [
        figures.attention_comparison({"a": PATTERN[0].numpy(), "b": PATTERN[0].numpy()}),
        figures.grouped_kernel(np.eye(3)),
        figures.diagonality_curve([0, 10], [0.3, 0.6], 0.9),
        figures.signature_bars([[1.0, None, None], [0.8, 1.0, -0.6]]),
        figures.cosine_curves([0, 10], [[0.1, 0.2], [0.9, 0.95]], [[0.0, 0.1], [0.8, 0.9]]),
        figures.error_vs_depth({"theta*": [1.0, 0.5, 0.3]}, {"theta*": GeometricFit(0.6, 0.7, 0.3, 0.0)}, 0.95),
        figures.error_vs_context([4, 8], {"theta*": [1.0, 0.5]}),
        figures.predicted_vs_true({"model": np.array([0.1, 0.2])}, np.array([0.1, 0.3])),
        figures.scale_sweep(
            [{"scale": 1.0, "margin_mean": -0.5, "margin_min": -0.6, "error_depth_1": 1.0, "error_depth_8": 0.5}], 8
        ),
    ]
    for fig in figs:
        for ax in fig.axes:
            if ax.get_label() == "<colorbar>":
                continue
            assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    ax = figs[5].axes[0]
    assert ax.get_yscale() == "log" and ax.get_xlabel() == "depth L (layers)"
    assert any(line.get_ydata()[0] == pytest.approx(0.95) for line in figs[2].axes[0].get_lines())


def test_a_series_keeps_its_colour_across_figures_and_a_quoted_fit_is_drawn():
    from matplotlib.colors import to_hex

    colour = lambda line: to_hex(line.get_color())  # noqa: E731
    depth = figures.error_vs_depth(
        {"theta*": [1.0, 0.5, 0.3], "trained model": [0.9, 0.4, 0.2]}, {"theta*": GeometricFit(0.5, 0.8, 0.2, 0.0)}
    )
    star, fit, model = depth.axes[0].get_lines()
    assert fit.get_ydata().tolist() == pytest.approx([1.0, 0.6, 0.4])  # 0.8 * 0.5**L + 0.2
    assert colour(fit) == "#000000" and fit.get_zorder() > star.get_zorder()  # black, over the curve it fits
    assert "0.500" in fit.get_label() and fit.get_label().startswith("fit to $\\theta^*$")
    extrapolation = figures.depth_extrapolation([1, 2], [0.5, 0.4], [0.3, 0.2], 1, "converges")
    mine, theirs = extrapolation.axes[0].get_lines()[:2]
    assert (colour(mine), colour(theirs)) == (colour(model), colour(star))  # the same roles, the same colours
    context = figures.error_vs_context([4, 8], {"trained model": [1.0, 0.5], "theta* (same depth)": [0.9, 0.4]})
    assert [colour(l) for l in context.axes[0].get_lines()] == [colour(model), colour(star)]
    assert len({to_hex(c) for c in series_colours(["model, a", "model, b", "theta*", "other"])}) == 4
    many = [to_hex(c) for c in series_colours([f"method {k}" for k in range(9)] + ["theta*"])]  # past the spares
    assert len(set(many)) == 10 and many[-1] == colour(star)  # the unused roles' colours, θ*'s kept for θ*
    assert len(series_colours([f"method {k}" for k in range(25)])) == 25  # then the palette again


def test_figures_draw_the_numbers_they_are_given():
    from ictd_interp.analyses.figures import circuits as circuit_figures

    depth = figures.error_vs_depth({"theta*": [1.0, 0.5, 0.3], "trained model": [0.9, 0.4, 0.2]})
    lines = depth.axes[0].get_lines()  # no fits given: the two curves only
    assert [list(l.get_ydata()) for l in lines] == [[1.0, 0.5, 0.3], [0.9, 0.4, 0.2]]
    bars = figures.signature_bars([[0.8, 1.0, -0.6]])
    heights = sorted(round(p.get_height(), 6) for p in bars.axes[0].patches)
    assert heights == sorted([1.0, 1.0, -1.0, 0.8, 1.0, -0.6])  # theta*'s (+, +, -) beside the layer's
    r2 = {"reward": [1.0, 0.9], "v_current": [0.2, 0.7]}
    heat = circuit_figures.probe_map(r2, "t").axes[0].collections[0].get_array().reshape(2, 2)
    assert heat.tolist() == [[1.0, 0.2], [0.9, 0.7]]  # rows: sites, columns: quantities
    rows = [SimpleNamespace(layer=0, head=1, td=0.5), SimpleNamespace(layer=1, head=0, td=-0.25)]
    grid = np.ma.filled(circuit_figures.head_map(rows, "td", "t", "c").axes[0].collections[0].get_array(), np.nan)
    grid = np.asarray(grid, dtype=float).reshape(2, 2)  # [layer, head]
    assert np.isnan(grid[0, 0]) and grid[0, 1] == 0.5 and grid[1, 0] == -0.25 and np.isnan(grid[1, 1])
    # two heads on one scale (the largest move, 4.0): a weak head's bars stay small beside a strong one's
    rows = [
        Signature(layer=2, head=0, raw=[0.4, 2.0, -0.2], normalised=[1.0, 5.0, -0.5], matches_td=False),
        Signature(layer=2, head=1, raw=[4.0, 1.0, -2.0], normalised=[1.0, 0.25, -0.5], matches_td=False),
    ]
    sig = circuit_figures.probed_signature_bars(rows, "t")
    assert sorted(round(p.get_height(), 6) for p in sig.axes[0].patches) == sorted(
        [1, 1, -1, 0.1, 0.5, -0.05, 1.0, 0.25, -0.5]
    )
    assert [t.get_text() for t in sig.axes[0].get_xticklabels()] == ["$\\theta^*$", "L2H0", "L2H1"]


def test_a_tied_models_heads_are_drawn_once_not_once_per_layer():
    steps, same = [0, 10], [[[0.2, 0.3]] * 3, [[0.4, 0.5]] * 3]  # [step][layer][head]: 3 identical layers, 2 heads
    labels = [l.get_label() for l in figures.diagonality_curve(steps, [0.25, 0.45], 0.9, same).axes[0].get_lines()]
    assert [l for l in labels if "H" in l] == ["all layers (tied) H0", "all layers (tied) H1"]
    one_head = [[[0.2]] * 3, [[0.4]] * 3]  # one tied head: the mean is that head, nothing more is drawn
    lines = figures.diagonality_curve(steps, [0.2, 0.4], 0.9, one_head).axes[0].get_lines()
    assert not [l for l in lines if "H0" in l.get_label()]
    per_layer = [[[0.2], [0.3]], [[0.4], [0.6]]]
    labels = [l.get_label() for l in figures.diagonality_curve(steps, [0.25, 0.5], 0.9, per_layer).axes[0].get_lines()]
    assert "L0H0" in labels and "L1H0" in labels


def test_a_contracting_map_whose_error_rises_is_never_said_to_converge():
    """quick-td-s0's layer contracts (radius < 1 on every task) but its error at 4x depth is far above its best:
    it settles on a worse fixed point, and does not converge."""
    from ictd_interp.analyses.metrics.theta_star_limit import star_map
    from ictd_interp.analyses.reports.stylised import algorithm_answers
    from ictd_interp.config.train import TrainConfig
    from ictd_interp.training.evaluation import EvalSet

    model = HookedICTDTransformer.from_pretrained("quick-td-s0")
    tasks = EvalSet.build(TrainConfig.from_preset("quick", n_eval_tasks=32)).tasks
    star = HookedICTDTransformer.from_theta_star(model.cfg)
    ext = algorithm_answers(model, star, tasks, star_map(star, tasks)).extrapolation
    assert not ext.converges and ext.curve_verdict.startswith("settles on a worse fixed point")
    assert ext.verdict.startswith("contracts when iterated") and "its error rises with depth" in ext.verdict
    assert "converges" not in ext.verdict


def test_every_analysis_draw_is_named_once_and_an_unknown_name_is_refused():
    """The reports' task sets come from ``draws``: no report adds an offset of its own to the evaluation seed."""
    import re
    from pathlib import Path

    from ictd_interp.analyses.metrics.draws import DRAWS, draw_seed

    assert draw_seed(100, "ladder") == 104 and set(DRAWS) >= {"long_context", "theta_star_limit", "probe_fit"}
    with pytest.raises(ValueError, match="unknown task set 'nope'"):
        draw_seed(0, "nope")
    root = Path(__file__).resolve().parents[2]
    written = [
        f"{p.relative_to(root)}:{n}"
        for folder in ("analyses", "ictd_interp")
        for p in (root / folder).rglob("*.py")
        for n, line in enumerate(p.read_text().splitlines(), start=1)
        if re.search(r"eval_seed \+ \d", line)
    ]
    assert written == []


def test_an_interval_of_a_diverged_error_is_written_in_scientific_form_not_forty_digits():
    from ictd_interp.analyses.metrics.intervals import Interval

    assert Interval(3.9e38, -3.3e38, 1.1e39, 5).text(".3f") == "3.9e+38 [-3.3e+38, 1.1e+39]"
    assert Interval(0.5, 0.4, 0.6, 5).text(".3f") == "0.500 [0.400, 0.600]"


def test_per_length_and_per_case_seeds_are_named_and_keep_their_values():
    """NEU's task sets and a benchmark case's own draws are named in draws.py; their values are the ones every shipped
    report and benchmark table was computed with (seed + n, seed + n + 1, 1000 × case seed + index)."""
    from ictd_interp.analyses.metrics.draws import case_seed, context_seed

    assert (context_seed(7, 30, "neu"), context_seed(7, 30, "neu_zero_closed_form"), case_seed(3, 2)) == (37, 38, 3002)
    with pytest.raises(ValueError, match="unknown per-length task set 'nope'"):
        context_seed(7, 30, "nope")


def test_a_number_past_a_million_is_written_in_scientific_notation_everywhere():
    from ictd_interp.io.text import shown

    assert (shown(7.5e25), shown(-2.0e6), shown(999999.0), shown(0.1234)) == (
        "7.5e+25",
        "-2e+06",
        "999999.000",
        "0.123",
    )
    assert (shown(None), shown(float("nan")), shown(float("inf"), ".3g")) == ("n/a", "not finite", "not finite")
