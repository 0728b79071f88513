"""The checkpoint track's pieces on cases worked out by hand: AUROC, balanced accuracy and false discoveries; the
cluster bootstrap resampling runs; labels from ladder levels; the first level's rule; and the readings on θ*
(each reads as TD exactly) against an untrained model (the weight readings do not)."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from ictd_interp.analyses.methods_benchmark.checkpoints import scores
from ictd_interp.analyses.methods_benchmark.checkpoints.population import LABELS, class_of
from ictd_interp.analyses.metrics.baselines import first_level
from ictd_interp.analyses.metrics.interchange import moved_predictions
from ictd_interp.analyses.metrics.intervals import paired
from ictd_interp.analyses.metrics.ladder import LEVELS, UNDECIDED
from ictd_interp.analyses.metrics.readings import BY_NAME, READINGS, Contexts, causal_site, causal_targets, effect_iia
from ictd_interp.config import ICTDConfig, TaskDistribution
from ictd_interp.models.registry import build_model
from ictd_interp.models.stylised.model import HookedICTDTransformer
from ictd_interp.tasks.sampling import sample_from


def test_auroc_counts_pairs_and_half_ties():
    # pairs (pos, neg): (3,1) (3,2) (2,1) win, (2,2) ties: (3 + 0.5) / 4
    assert scores.auroc(np.array([3.0, 2.0]), np.array([1.0, 2.0])) == pytest.approx(0.875)
    assert scores.auroc(np.array([-np.inf]), np.array([0.0])) == 0.0  # a missing score ranks lowest
    assert scores.auroc(np.array([1.0]), np.array([])) is None


def test_balanced_accuracy_and_false_discoveries():
    # TPR 2/3, TNR 1/2
    assert scores.balanced_accuracy(np.array([1, 1, 0], bool), np.array([1, 0], bool)) == pytest.approx(7 / 12)
    calls, positive = np.array([1, 1, 1, 0], bool), np.array([1, 0, 0, 1], bool)
    assert scores.false_discovery(calls, positive) == pytest.approx(2 / 3)
    assert scores.false_discovery(np.zeros(3, bool), positive[:3]) is None


def _record(run, label, objective, score):
    return {"run": run, "label": label, "objective": objective, "readings": {"x": score}}


def test_scores_on_a_population_made_by_hand():
    td = [_record(f"td{k}", LABELS[0], "td", 1.0 + k) for k in range(4)]
    early = [_record(f"se{k}", LABELS[1], "td", 0.5) for k in range(4)]
    other = [_record(f"mc{k}", LABELS[2], "mc", 2.0) for k in range(4)]  # MC scores above two TD runs
    undecided = [_record("u", UNDECIDED, "td", 100.0)]  # trained on TD, undecided: left out of every score
    undecided += [_record("umc", UNDECIDED, "mc", 0.0)]  # trained on MC: a negative whatever its sample says
    out = scores.score_reading(td + early + other + undecided, "x", threshold=0.9)
    assert out["auroc:TD vs stopped early"].value == 1.0
    assert out["auroc:TD vs stopped early"].lo == 1.0  # every resample separates
    # TD scores 1, 2, 3, 4 against 2, 2, 2, 2 and 0: against each 2, 1 loses, 2 ties, 3 and 4 win (2.5 of 4); all
    # four beat 0: (4 * 2.5 + 4) / 20
    assert out["auroc:TD vs other objectives"].value == pytest.approx(0.7)
    assert out["balanced:TD vs stopped early"].value == 1.0
    assert out["fdr"].value == pytest.approx(4 / 8)  # the rule calls 4 TD and 4 MC checkpoints TD
    e = out["auroc:TD vs other objectives"]
    assert e.lo < e.value < e.hi


def test_the_bootstrap_resamples_runs_not_checkpoints():
    # ten identical checkpoints per run carry no more information than one: resampling runs (same seed, same run
    # draws) gives the same interval; resampling checkpoints would give a narrower one
    one = [_record(f"p{k}", LABELS[0], "td", float(k)) for k in (1, 2, 3)]
    one += [_record(f"n{k}", LABELS[1], "td", k + 0.5) for k in (0, 1, 2)]
    ten = [r for r in one for _ in range(10)]
    a, b = (scores.score_reading(recs, "x", 0.9)["auroc:TD vs stopped early"] for recs in (one, ten))
    assert (a.value, a.lo, a.hi) == (b.value, b.lo, b.hi) and a.lo < a.value
    assert scores.counts(ten) == {
        "checkpoints": 60,
        "runs": 6,
        "label": {LABELS[0]: 30, LABELS[1]: 30},
        "objective": {"td": 60},
    }


def test_labels_from_ladder_levels():
    assert class_of(LEVELS[3]) == "runs TD"
    assert class_of(LEVELS[1]) == class_of(LEVELS[2]) == "stopped early"
    assert class_of(LEVELS[0]) == "learns nothing"
    assert class_of(UNDECIDED) == UNDECIDED


def test_first_level_rule():
    below, above, across = [np.array(v, float) for v in ([0.0, 0.1, 0.0, 0.1], [1.0, 1.1, 1.0, 1.1], [-1, 1, -1, 1])]
    model = np.full(4, 0.5)
    assert first_level({"constant": paired(model, above), "first_visit_mc": paired(model, above)}) is True
    assert first_level({"constant": paired(model, above), "first_visit_mc": paired(model, below)}) is False
    assert first_level({"constant": paired(model, above), "first_visit_mc": paired(model, model + across)}) is None


@pytest.fixture(scope="module")
def contexts():
    dist = TaskDistribution(n_states=5, d_features=4, context_len=20, gamma=0.9)
    return Contexts(
        sample_from(dist, 32, seed=1), sample_from(dist, 32, seed=2), sample_from(dist, 32, seed=3, length=100)
    )


def test_theta_star_reads_as_td_and_an_untrained_model_does_not(contexts):
    cfg = ICTDConfig(d_features=4, n_layers=6, tied=True, dtype="float64")
    star = HookedICTDTransformer.from_theta_star(cfg)
    read = {r.name: r.score(star, contexts) for r in READINGS if r.name != "das_value"}  # DAS: tests/integration
    assert read["cos_V"] == pytest.approx(1.0, abs=1e-12) and read["cos_A"] == pytest.approx(1.0, abs=1e-12)
    assert read["signature"] == 1.0 and read["algorithm"] == 1.0
    assert read["discount"] == pytest.approx(0.0, abs=1e-12)  # b/(−c) is γ exactly
    assert read["diagonality"] == pytest.approx(0.0, abs=1e-12)  # θ* against itself
    assert read["depth_limit"] == pytest.approx(0.0, abs=1e-9)  # θ*'s limit is CE (depth_limit's docstring)
    assert 0 < read["spectral_radius"] < 0.05  # it contracts, slowly
    assert read["td_profile"] == pytest.approx(0.0, abs=1e-12)  # θ*'s layer is TD's: its activations are TD's iterates
    assert read["patching_value"] == pytest.approx(1.0, abs=1e-12)  # θ*'s own row moved: its own counterfactual
    untrained = build_model(cfg)
    names = ("cos_A", "signature", "algorithm", "patching_value", "td_profile")
    weights = {name: BY_NAME[name].score(untrained, contexts) for name in names}
    assert weights["cos_A"] < 0.5 and weights["signature"] == 0.0 and weights["algorithm"] == 0.0
    assert weights["td_profile"] < -1.0  # its worst layer more than 100% off TD's iterates (the rule: 10%)
    assert weights["patching_value"] < 0.5
    assert (
        BY_NAME["patching_value"].score(HookedICTDTransformer.from_theta_star(replace(cfg, n_layers=1)), contexts)
        is None
    )


def test_the_td_profile_compares_each_layers_activations_with_td_run_on_the_learned_kernel(contexts):
    """By hand: a layer whose reward weight is twice its step (the rest TD's) moves its values to twice TD's after one
    layer, e_1 = 1; a kernel other than θ*'s is TD's own when the value row is (e_l = 0: the profile judges what the
    layer computes with its kernel, not the kernel); a second layer whose discount is off leaves the first layer's 0
    and departs at the second; the full mask has no TD iterate to compare (None)."""
    from ictd_interp.analyses.metrics.td_profile import td_iterates, td_profile, value_activations

    cfg = ICTDConfig(d_features=4, n_layers=2, tied=False, dtype="float64")
    d, row = cfg.d_features, HookedICTDTransformer.from_theta_star(cfg).layout.current
    doubled = HookedICTDTransformer.from_theta_star(replace(cfg, n_layers=1))
    with torch.no_grad():
        doubled.unique_attention()[0].V[0, row, d] *= 2.0
    assert td_profile(doubled, contexts.tasks) == pytest.approx([1.0], abs=1e-12)
    assert torch.allclose(value_activations(doubled, contexts.tasks), 2 * td_iterates(doubled, contexts.tasks))
    sharp = HookedICTDTransformer.from_theta_star(cfg)
    off = HookedICTDTransformer.from_theta_star(cfg)
    with torch.no_grad():
        for attn in sharp.unique_attention():
            attn.A[0, :d, :d] *= 3.0  # a sharper kernel, TD's value row
        off.unique_attention()[1].V[0, row, d + 1] *= 0.8  # the second layer's discount 0.8 γ
    assert td_profile(sharp, contexts.tasks) == pytest.approx([0.0, 0.0], abs=1e-12)
    first, second = td_profile(off, contexts.tasks)
    assert first == pytest.approx(0.0, abs=1e-12) and second > 0.01
    assert td_profile(HookedICTDTransformer.from_theta_star(replace(cfg, mask="full")), contexts.tasks) is None
    still = HookedICTDTransformer.from_theta_star(cfg)
    with torch.no_grad():
        for attn in still.unique_attention():
            attn.V.zero_()  # every step 0: TD's iterates stay 0, so nothing is compared (inf), and it does not read TD
    assert td_profile(still, contexts.tasks) == [float("inf")] * 2
    assert BY_NAME["td_profile"].score(still, contexts) is None


def test_the_causal_score_is_the_effect_not_the_prediction(contexts):
    """``effect_iia`` by hand; on θ* a move that does nothing scores 0 (its predictions still agree with the
    counterfactuals to R² 0.9 and more), and moving the reward row or the value row at another layer fails."""
    assert effect_iia(torch.tensor([1.0, 2.0]), torch.tensor([1.5, 2.0]), torch.tensor([0.5, -1.0])) == pytest.approx(
        1 - 0.125 / 0.625
    )
    star = HookedICTDTransformer.from_theta_star(ICTDConfig(d_features=4, n_layers=6, tied=True, dtype="float64"))
    target, effect = causal_targets(star, star, contexts.tasks)
    site, lay = causal_site(star), star.layout
    assert site == "blocks.2.hook_resid_post" and effect.abs().mean() > 0.05

    def row_move(row):
        def move(base, source):
            base = base.clone()
            base[..., row] = source[..., row]
            return base

        return move

    moves = {"nothing": lambda base, source: base, "value": row_move(lay.current), "reward": row_move(lay.reward)}
    moved = moved_predictions(star, contexts.tasks, site, moves)
    score = {name: effect_iia(p, target, effect) for name, p in moved.items()}
    assert score["value"] == pytest.approx(1.0, abs=1e-12) and score["nothing"] == pytest.approx(0.0, abs=1e-12)
    assert score["reward"] < 0.5
    fooled = 1 - float((moved["nothing"] - target).pow(2).mean() / target.var(unbiased=False))
    assert fooled > 0.9  # what an accuracy on the predictions would have said of doing nothing
    elsewhere = moved_predictions(star, contexts.tasks, "blocks.5.hook_resid_post", {"v": row_move(lay.current)})
    assert effect_iia(elsewhere["v"], target, effect) < 0.5


def test_the_sealed_population_draws_its_seeds_from_the_key(tmp_path):
    from ictd_interp.analyses.methods_benchmark.checkpoints.track import SEALED_SEEDS, population_spec
    from ictd_interp.analyses.methods_benchmark.sealed import Split

    public = population_spec()
    key = tmp_path / "key"
    key.write_bytes(b"k" * 32)
    sealed, again = population_spec(Split.read("private", str(key))), population_spec(Split.read("private", str(key)))
    assert sealed.seeds == again.seeds and len(sealed.seeds) == SEALED_SEEDS
    assert not set(sealed.seeds) & set(public.seeds) and all(0 <= s < 2**31 for s in sealed.seeds)
    assert sealed.recipes == public.recipes and sealed.grid == public.grid  # the same recipes, other seeds
    key.write_bytes(b"j" * 32)
    assert population_spec(Split.read("private", str(key))).seeds != sealed.seeds
    more = population_spec(Split.read("private", str(key)), seeds=5).seeds  # more seeds keep the first ones
    assert len(more) == 5 and more[:SEALED_SEEDS] == population_spec(Split.read("private", str(key))).seeds
    assert population_spec(seeds=2).seeds == [0, 1] and public.seeds == [0, 1, 2, 3, 4, 5]


def test_the_answer_says_what_the_weights_say_and_which_readings_cannot_tell():
    from ictd_interp.analyses.metrics.readings import WeightReading
    from ictd_interp.analyses.reports.summary_md import readings_sentence

    rows = [
        WeightReading(name="discount", score=-0.007, reads_as_td=True, rule="r", auroc=[0.99, 0.96, 1.0]),
        WeightReading(name="depth_limit", score=-0.8, reads_as_td=False, rule="r", auroc=[0.97, 0.9, 1.0]),
        WeightReading(name="cos_V", score=0.9997, reads_as_td=True, rule="r", auroc=[0.42, 0.3, 0.58]),
        WeightReading(name="signature", score=1.0, reads_as_td=True, rule="r", auroc=None),
    ]
    assert [r.tells for r in rows] == [True, None, False, None]
    text = readings_sentence(rows)
    assert "effective discount 0.007 from γ: **reads as TD** (AUROC 0.99 [0.96, 1.00])" in text
    assert "the layer's limit 80% from CE's error at n = 400: **does not read as TD**" in text
    far = WeightReading(name="depth_limit", score=-35.36, reads_as_td=False, rule="r", auroc=None)
    assert "the layer's limit at 36.4× CE's error at n = 400: **does not read as TD**" in readings_sentence([far])
    assert "signature (+, +, −) held: **reads as TD** (AUROC unmeasured)" in text
    assert text.endswith("Cannot tell the two apart: cos_V (AUROC 0.42 [0.30, 0.58]).")


def test_a_given_population_is_not_called_public_or_sealed():
    """The report's and figure's title: ``--population`` studies are "given", whichever split; else the split's."""
    from ictd_interp.analyses.commands.reports import population_name
    from ictd_interp.analyses.methods_benchmark.sealed import PUBLIC, Split

    keyed = Split("private", b"k" * 32)
    assert population_name(PUBLIC, []) == "public" and population_name(keyed, []) == "sealed"
    assert population_name(PUBLIC, ["runs/a"]) == "given" and population_name(keyed, ["runs/a"]) == "given"


def test_a_track_scores_the_readings_asked_and_its_report_shows_those_alone(tmp_path):
    """``--readings``: names checked against the readings (in their order), and a report of records that carry some
    readings tables and draws those alone."""
    from ictd_interp.analyses.methods_benchmark.checkpoints.report import write_report
    from ictd_interp.analyses.methods_benchmark.checkpoints.track import chosen_readings

    assert chosen_readings(None) == [r.name for r in READINGS]
    assert chosen_readings(["discount", "depth_limit"]) == [
        r.name for r in READINGS if r.name in ("depth_limit", "discount")
    ]
    for bad in (["depth_limt"], []):
        with pytest.raises(ValueError, match="^readings: unknown"):
            chosen_readings(bad)
    records = [
        {"run": f"r{k}", "label": label, "objective": "td", "readings": {"depth_limit": score}}
        for k, (label, score) in enumerate([(LABELS[0], 0.99), (LABELS[0], 0.98), (LABELS[1], 0.2), (LABELS[1], 0.3)])
    ]
    report = write_report(records, tmp_path, "given").read_text()
    assert "| `depth_limit` |" in report and "| `discount` |" not in report
    assert "Tells: `depth_limit`" in report or "Undecided: `depth_limit`" in report
    assert f"Scored: 1 of the {len(READINGS)} readings" in report
