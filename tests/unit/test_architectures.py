"""The architecture registry: one record per architecture (its config class), everything else derived from it."""

import pytest
import torch

from ictd_interp.analyses.analyze import REPORTS, report_for
from ictd_interp.config.linear import LinearICTDConfig
from ictd_interp.config.train import ARCHITECTURES, MODEL_CONFIGS
from ictd_interp.models import HookedICTDTransformer, HookedLinearICTD, HookedStandardTransformer
from ictd_interp.models.registry import build_model, holds_theta_star, model_class


def test_each_record_names_its_model_class_and_each_has_a_report():
    assert ARCHITECTURES == ("stylised", "standard", "linear-ictd")
    classes = {a: model_class(a) for a in ARCHITECTURES}
    assert classes == {
        "stylised": HookedICTDTransformer,
        "standard": HookedStandardTransformer,
        "linear-ictd": HookedLinearICTD,
    }
    assert all(cls.CONFIG is MODEL_CONFIGS[a] for a, cls in classes.items())
    assert set(REPORTS) == set(ARCHITECTURES)


def test_only_the_stylised_record_holds_theta_star():
    held = {a: holds_theta_star(build_model(MODEL_CONFIGS[a](d_features=3))) for a in ARCHITECTURES}
    assert held == {"stylised": True, "standard": False, "linear-ictd": False}


def test_a_record_naming_a_class_of_another_record_is_refused(monkeypatch):
    monkeypatch.setattr(LinearICTDConfig, "original_architecture", "HookedICTDTransformer")
    monkeypatch.setattr(LinearICTDConfig, "model_module", "ictd_interp.models.stylised.model")
    with pytest.raises(TypeError, match="takes ICTDConfig, not LinearICTDConfig"):
        model_class("linear-ictd")


def test_an_unknown_architecture_and_a_missing_report_are_named(monkeypatch):
    with pytest.raises(ValueError, match="architecture"):
        model_class("nonsense")
    monkeypatch.delitem(REPORTS, "standard")
    with pytest.raises(ValueError, match="'standard'.*has no report: add analyses/reports/<name>.py"):
        report_for("standard")


def test_the_analyses_read_the_records_flag_not_the_architectures_name():
    """A stylised model whose record said ``holds_theta_star = False`` is analysed in function space: the weight
    probes and the stored-value probe are off although its architecture is still named "stylised"."""
    from ictd_interp.analyses.metrics.site_probes import value_targets
    from ictd_interp.config import TrainConfig
    from ictd_interp.training.evaluation import EvalSet, evaluate

    config = TrainConfig.from_preset("quick", n_eval_tasks=4)
    model = build_model(config.model)
    eval_set = EvalSet.build(config)
    resid = torch.zeros(1, 4, config.tasks.context_len + 1, config.model.d_model)
    assert evaluate(model, eval_set).cos_A is not None
    assert value_targets(model, eval_set.tasks, "stored", resid).shape == (1, 4, config.tasks.context_len + 1)
    model.cfg.holds_theta_star = False  # the instance's record says otherwise; the name stays "stylised"
    assert model.cfg.architecture == "stylised" and evaluate(model, eval_set).cos_A is None
    with pytest.raises(ValueError, match="'stored' needs"):
        value_targets(model, eval_set.tasks, "stored", resid)


def test_a_model_with_layernorm_must_process_its_own_weights():
    model = build_model(MODEL_CONFIGS["standard"](d_features=3))
    with pytest.raises(NotImplementedError, match="has LayerNorm"):
        super(type(model), model).process_weights_(True, False, False)  # the base's default, not the class's
    build_model(MODEL_CONFIGS["stylised"](d_features=3)).process_weights_(True, True, True)  # nothing to do
