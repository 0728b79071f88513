"""The paper's headline claim, judged in function space (docs/theory.md §7a): the quick preset pretrains a model
that learns in context; the depth-3 preset of release 0.2, whose weight cosines with θ* are as high, does not."""

import pytest

from ictd_interp.analyses.cards import verdict
from ictd_interp.config.train import TrainConfig
from ictd_interp.training.trainer import train


@pytest.mark.slow
def test_the_quick_preset_learns_in_context_where_three_layers_do_not(tmp_path):
    run = train(TrainConfig.from_preset("quick", seed=0), tmp_path / "quick", progress=False)
    quick, depth3 = verdict(str(tmp_path / "quick")), verdict("depth3-td-s0")
    assert quick["learns_in_context"] and not depth3["learns_in_context"]
    assert abs(quick["effective_discount"] - 0.9) < 0.1 < depth3["effective_discount"] - 0.9  # 0.93 against 1.33
    assert min(run.metrics[-1]["cos_A"]) > 0.95 and min(depth3_cosines()) > 0.95  # the cosines cannot tell them apart


def depth3_cosines() -> list[float]:
    from ictd_interp.io.pretrained import card

    return card("depth3-td-s0")["final_metrics"]["cos_A"]
