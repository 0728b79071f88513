"""The first level's three answers, on per-task errors made by hand: learns in context, does not (an interval above
0), and undecided (no interval above 0, one straddling it), which names the sample that would decide."""

import numpy as np

from ictd_interp.analyses.metrics import in_context
from ictd_interp.analyses.metrics.baselines import MODEL_ROW, Baselines, BestSoftmaxTD, Estimate
from ictd_interp.analyses.metrics.intervals import paired, t_interval
from ictd_interp.analyses.metrics.ladder import UNDECIDED, level


def _base(model, constant, first_visit):
    def row(err, versus=None):
        return Estimate(t_interval(err), t_interval(err), t_interval(err * 0), versus)

    rows = {
        MODEL_ROW: row(model),
        "constant": row(constant, paired(model, constant)),
        "first_visit_mc": row(first_visit, paired(model, first_visit)),
    }
    return Baselines(n_tasks=len(model), depth=3, estimators=rows, best_softmax_td=BestSoftmaxTD(1.0, 1.0), sentence="")


def _verdict(base):
    discount = in_context.discount_reading(None, None, 0.9, "none")
    it = in_context.Iterated(depths=[3, 12], msve=[0.0, 0.0], change=t_interval([0.0, 0.0]), verdict="flat")
    levels = []
    found = in_context.verdict(base, discount, it, lambda learns: levels.append(learns))
    return found, levels[0]


def test_learns_does_not_and_undecided_by_hand():
    rng = np.random.default_rng(0)
    model = 0.4 + 0.01 * rng.standard_normal(64)
    # both differences far below 0: learns
    found, first = _verdict(_base(model, model + 0.2, model + 0.1))
    assert found.learns_in_context and first is True and found.verdict.startswith("Learns in context")
    # worse than first-visit MC for sure: a decided no
    found, first = _verdict(_base(model, model + 0.2, model - 0.1))
    assert not found.learns_in_context and first is False and found.verdict.startswith("Does not learn in context")
    # the difference from first-visit MC: mean −0.01, per-task sd 0.1 over 64 tasks: its interval straddles 0
    noise = rng.standard_normal(64)
    noise = (noise - noise.mean()) / noise.std(ddof=1)
    found, first = _verdict(_base(model, model + 0.2, model + 0.01 + 0.1 * noise))
    assert not found.learns_in_context and first is None
    assert found.verdict.startswith("Undecided") and "never" not in found.verdict
    # half-width t(0.975, 63) 0.1 / 8 = 0.02498; (0.02498 / 0.01)² × 64 = 399.4 tasks
    assert "about 400 tasks would decide it" in found.verdict
    assert level(None, True, True, True, True) == UNDECIDED
