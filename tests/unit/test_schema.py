"""The report schema: typed sections written and read through one module, flattened along declared types,
and a study table generated from declared columns."""

import json
import math

import pandas as pd
import pytest

from ictd_interp.analyses.metrics.algorithm_id import IterationMap, LayerReading
from ictd_interp.analyses.metrics.baselines import Baselines, BestSoftmaxTD, Estimate
from ictd_interp.analyses.metrics.convergence import GeometricFit
from ictd_interp.analyses.metrics.extrapolation import Extrapolation
from ictd_interp.analyses.metrics.heads import HeadKernel
from ictd_interp.analyses.metrics.intervals import Interval, Paired
from ictd_interp.analyses.studies.report import markdown
from ictd_interp.analyses.studies.spec import StudySpec
from ictd_interp.analyses.summary.sections import Algorithm, Circuit, Convergence, DepthCurves, Diagonality, Summary
from ictd_interp.analyses.summary.store import build, read_summary, to_json, write_summary
from ictd_interp.analyses.summary.tables import STUDY_COLUMNS, Column, flatten, summary_column
from ictd_interp.training.evaluation import EvalMetrics


def reading(layer: int, discount: float, in_family: bool = False, **optional) -> LayerReading:
    """A layer read from weights with ``b = discount``, ``c = -1`` (its effective discount ``b / -c``)."""
    return LayerReading(
        layer=layer,
        source="weights",
        step=1.0,
        b=discount,
        c=-1.0,
        effective_discount=discount,
        current_weight=-1.0,
        beta=None,
        fve=None,
        in_family=in_family,
        identifiable=True,
        **optional,
    )


def tiny_summary() -> Summary:
    """A two-layer summary worked by hand."""
    iv = Interval(1.0, 0.5, 1.5, 10)
    return Summary(
        source="x",
        config={"tasks": {"gamma": 0.9}},
        model_config={"n_layers": 2, "tied": False},
        n_eval_tasks=10,
        eval_tasks="10 tasks",
        metrics=EvalMetrics(
            eval_msve=0.25,
            theta_star_msve=0.5,
            kernel_diagonality_mean=0.3,
            cos_A=[0.9, 0.8],
            cos_V=[0.7, None],
            signature=[[1.0, 0.5, -1.0], [1.0, None, -0.2]],
            signature_match=[True, False],
        ),
        baselines=Baselines(
            n_tasks=10,
            depth=2,
            estimators={
                "model": Estimate(iv, iv, iv),
                "constant": Estimate(iv, iv, iv, Paired(Interval(-0.2, -0.3, -0.1, 10), "lower")),
            },
            best_softmax_td=BestSoftmaxTD(1.0, 2.0),
            sentence="s",
        ),
        diagonality=Diagonality(theta_star=0.28, model=[[0.1], [0.2]], threshold=0.95),
        convergence=Convergence(
            context_lengths=[4, 8],
            context={"m": [1.0, 0.5]},
            depth=DepthCurves([2.0, 1.0]),
            theta_star_fit=GeometricFit(0.87, 1.0, math.nan, 0.0),
            one_minus_C=1.9,
        ),
        circuit=Circuit(
            max_td_kernel_correlation=0.4, max_tabular_kernel_correlation=0.1, heads=[HeadKernel(0, 1, 0.4)]
        ),
        algorithm=Algorithm(
            layers=[
                reading(
                    0,
                    0.9,
                    iteration=IterationMap(
                        spectral_radius_mean=0.5,
                        spectral_radius_min=0.4,
                        spectral_radius_max=0.6,
                        fraction_contracting=1.0,
                        converges=True,
                        verdict="x",
                        fixed_point_error=None,
                        fixed_point_error_interval=None,
                    ),
                ),
                reading(1, 1.4, in_family=True),
            ],
            source="weights",
            extrapolation=Extrapolation(
                trained_depth=2,
                best_depth=1,
                converges=False,
                verdict="d",
                depths=[1, 2],
                model=[1.0, 2.0],
                reference=[1.0, 0.5],
            ),
        ),
    )


def test_written_and_read_back_typed_with_nan_as_null(tmp_path):
    summary = tiny_summary()
    write_summary(summary, tmp_path / "summary.json")
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["convergence"]["theta_star_fit"] == {"rate": 0.87, "amplitude": 1.0, "floor": None, "sse": 0.0}
    assert data["algorithm"]["layers"][0]["fve"] is None  # a required field is written even when it is None
    assert "fixed_point_errors" not in data["algorithm"]["layers"][0]["iteration"]  # an optional one is not
    assert "probes" not in data and "margin" not in data  # sections that do not apply are left out
    back = read_summary(tmp_path / "summary.json")
    assert isinstance(back.baselines.estimators["constant"].model_minus_baseline, Paired)
    assert back.baselines.estimators["constant"].model_minus_baseline.difference.hi == -0.1
    assert back.algorithm.extrapolation.converges is False and back.gamma == 0.9
    assert math.isnan(back.convergence.theta_star_fit.floor)  # null read back as NaN where a float is declared
    assert back.algorithm.layers[0] == tiny_summary().algorithm.layers[0]  # typed to the leaves
    assert to_json(back) == data


def test_a_file_that_does_not_match_names_the_file_and_the_field(tmp_path):
    data = to_json(tiny_summary())
    data["metrics"]["eval_mse"] = data["metrics"].pop("eval_msve")
    (tmp_path / "summary.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"summary.json: .*metrics: unknown field\(s\) \['eval_mse'\]"):
        read_summary(tmp_path / "summary.json")
    del data["metrics"]
    (tmp_path / "summary.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"missing field\(s\) \['metrics'\]"):
        read_summary(tmp_path / "summary.json")
    (tmp_path / "summary.json").write_text("{")
    with pytest.raises(ValueError, match="corrupt or truncated"):
        read_summary(tmp_path / "summary.json")


def test_flatten_follows_the_declared_types_not_list_lengths():
    scalars, layers = flatten(tiny_summary())
    assert scalars["metrics.eval_msve"] == 0.25 and scalars["baselines.estimators.constant.msve.hi"] == 1.5
    assert scalars["baselines.estimators.constant.model_minus_baseline.verdict"] == "lower"
    assert scalars["algorithm.extrapolation.converges"] is False
    assert "algorithm.extrapolation.depths" not in scalars  # a two-entry list, but declared detail: not tabulated
    assert not any(k.startswith(("circuit.heads", "convergence.context", "source")) for k in scalars)
    layer = {
        f"algorithm.layers.{k}": v
        for k, v in (
            ("layer", 0),
            ("source", "weights"),
            ("step", 1.0),
            ("b", 0.9),
            ("c", -1.0),
            ("effective_discount", 0.9),
            ("current_weight", -1.0),
            ("beta", None),
            ("fve", None),
            ("in_family", False),
            ("identifiable", True),
        )
    }
    assert layers[0] == {
        "metrics.cos_A": 0.9,
        "metrics.cos_V": 0.7,
        "metrics.signature.reward": 1.0,
        "metrics.signature.next value": 0.5,
        "metrics.signature.current value": -1.0,
        "metrics.signature_match": True,
        "diagonality.model": 0.1,
        **layer,
    }  # the iteration: a table
    assert layers[1]["metrics.cos_V"] is None and layers[1]["algorithm.layers.in_family"] is True


def test_every_study_column_names_a_field_of_the_schema():
    assert all(summary_column(c.key) == c.key for c in STUDY_COLUMNS)
    assert summary_column("algorithm.layers.rg_share")  # a linear model's layer reading: the union's other type
    assert summary_column("baselines.estimators.anything.msve.mean")  # a table's key: any name
    with pytest.raises(ValueError, match="no field 'eval_mse'"):  # the check can fail
        summary_column("metrics.eval_mse")
    with pytest.raises(ValueError, match="no field 'discount'"):
        Column("effective discount", "algorithm.layers.discount")  # a column is checked when it is declared


def test_the_study_table_is_generated_from_its_columns():
    done = {
        "cell": "a-s0",
        "condition": "a",
        "seed": 0,
        "status": "done",
        "error": None,
        "layer": 0,
        "metrics.eval_msve": 0.5,
        "algorithm.layers.effective_discount": 0.9,
        "algorithm.layers.in_family": False,
    }
    failed = {"cell": "b-s0", "condition": "b", "seed": 0, "status": "failed", "error": "boom", "layer": None}
    spec = StudySpec(name="t", preset="quick", seeds=[0])
    text = markdown(spec, pd.DataFrame([done, failed]), [])
    header = next(line for line in text.splitlines() if line.startswith("| condition"))
    rows = [line for line in text.splitlines() if line.startswith(("| a ", "| b "))]
    assert header.count("|") == len(STUDY_COLUMNS) + 4
    assert all(row.count("|") == header.count("|") for row in rows)
    assert "0.500 (one value: no interval)" in rows[0]
    assert "0.900" not in rows[0]  # a discount is shown only for a layer the TD family explains
    assert rows[1].startswith("| b | 0 | 1 |")


def test_typed_sections_reject_a_wrong_shape():
    with pytest.raises(ValueError, match="expected a table"):
        build(Summary, {**to_json(tiny_summary()), "metrics": [1, 2]})


def test_a_summary_of_the_previous_release_reads(tmp_path):
    """Before the nesting, summary.json held a flat TrainConfig; study folders of that release still tabulate."""
    data = to_json(tiny_summary())
    data["config"] = {"architecture": "stylised", "gamma": 0.8, "context_len": 30, "steps": 3000}
    (tmp_path / "summary.json").write_text(json.dumps(data))
    summary = read_summary(tmp_path / "summary.json")
    assert summary.gamma == 0.8 and flatten(summary)[0]["metrics.eval_msve"] == 0.25


@pytest.mark.parametrize("architecture, name", [("stylised", "theta*"), ("linear-ictd", "TD(0) construction")])
def test_a_schema_2_extrapolation_reads_with_its_construction_named(tmp_path, architecture, name):
    """Schema 2 stored the extrapolation's construction curve as ``theta_star``, a linear model's TD(0) one too."""
    data = to_json(tiny_summary())
    data["architecture"] = architecture
    ext = data["algorithm"]["extrapolation"]
    ext["theta_star"] = ext.pop("reference")
    del ext["reference_name"]
    (tmp_path / "summary.json").write_text(json.dumps(data))
    read = read_summary(tmp_path / "summary.json").algorithm.extrapolation
    assert read.reference == [1.0, 0.5] and read.reference_name == name
