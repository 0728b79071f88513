"""The report's schema: one dataclass per section of ``summary.json``, written and read here only.

``compute`` (``reports.stylised``, ``reports.standard``) fills a ``Summary``; ``write_summary`` writes it
(sections that do not apply to a model's architecture are left out, non-finite numbers become null);
``read_summary`` reads it back typed, naming the file and the field on a mismatch. Renderers, the study
tables and the CLI read sections by attribute, never by string keys.

Study tables come from the schema too: ``flatten`` opens every section along the declared types — a field
declared ``per_layer`` becomes one value per layer, ``detail`` fields (curves, examples, full tables) stay
in ``summary.json`` — and ``STUDY_COLUMNS`` names, for each column of a study's table, which flattened
field it shows and how it aggregates over layers; the table's header and cells are generated from it.
"""

from __future__ import annotations

import json
import math
import types
import typing
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Optional, Union

from analyses.metrics.intervals import Interval, Paired
from ictd_interp.models.construction import SIGNATURE_INPUTS
from ictd_interp.config.train import MODEL_CONFIGS
from ictd_interp.training.evaluation import EvalMetrics

SCHEMA_VERSION = 3  # 1: the untyped summary of earlier releases; 2: extrapolation's reference curve named
# "theta_star" whatever it was (both read: ``upgraded``)


def per_layer(names: Optional[tuple[str, ...]] = None, default: Any = None) -> Any:
    """A list indexed by layer; ``names`` label the entries of each layer's inner list."""
    return field(default=default, metadata={"per_layer": True, "names": names})


def detail(default: Any = None) -> Any:
    """Kept in summary.json for figures and readers, not tabulated."""
    return field(default=default, metadata={"detail": True})


@dataclass
class Estimate:
    """One estimator's error on the evaluation tasks: MSVE = level + shape, each with its t interval, and
    (for a baseline) the paired difference of the model's per-task MSVE from this estimator's."""

    msve: Interval
    level: Interval
    shape: Interval
    model_minus_baseline: Optional[Paired] = None


@dataclass
class Baselines:
    n_tasks: int
    depth: int
    estimators: dict[str, Estimate]
    best_softmax_td: dict[str, Optional[float]]  # the (alpha, beta) chosen on the tasks
    sentence: str


@dataclass
class Probes:
    """The stylised model against θ* on the same prompts."""

    rms_gap_to_theta_star: float
    mean_abs_gap_to_theta_star: float
    rms_error_model: float
    rms_error_theta_star: float
    sensitivity_cosine: float
    circuits: dict[str, list] = detail()  # QK and OV cosines per layer and head
    activation_cosines: dict[str, float] = detail()


@dataclass
class Diagonality:
    theta_star: float
    model: Optional[list[list[float]]] = per_layer()  # [layer][head]
    threshold: Optional[float] = None  # (1 + gamma) / 2


@dataclass
class Margin:
    """Assumption 5.1's margin C: the model's feature block and θ*'s, on the evaluation tasks."""

    model_mean: float
    theta_star_mean: float
    theta_star_min: float


@dataclass
class Extrapolation:
    trained_depth: int
    best_depth: int
    converges: bool
    verdict: str
    depths: list[int] = detail()
    model: list[Optional[float]] = detail()
    reference: list[Optional[float]] = detail()  # the construction run to the same depths
    reference_name: str = "theta*"  # theta*, or a linear model's "TD(0) construction"
    curve_verdict: Optional[str] = None
    verdict_from: Optional[str] = None


@dataclass
class Algorithm:
    """Which algorithm each layer runs, and what iterating the last layer does."""

    layers: Optional[list[dict[str, Any]]] = per_layer()
    source: Optional[str] = None  # "weights" (read exactly) or "fit"
    exact_read_unavailable: Optional[str] = None
    extrapolation: Optional[Extrapolation] = None
    theta_star_map: Optional[dict[str, Any]] = None
    layers_tabular: Optional[list[dict[str, Any]]] = detail()


@dataclass
class HeadKernel:
    """One head's attention against the kernels (``metrics.heads.head_kernels``): its correlation with θ*'s
    softmax-TD kernel and with the tabular same-state kernel, and its diagonality."""

    layer: int
    head: int
    td_kernel_correlation: float
    tabular_kernel_correlation: Optional[float] = None
    diagonality: Optional[float] = None


@dataclass(kw_only=True)  # fields in summary.json's order
class Signature:
    """A head's direct effect (``head`` set) or a layer's whole update (``head`` None) on the probed value, as
    (reward, next value, current value) weights: ``raw``, ``normalised`` by the largest, and whether TD's signs."""

    layer: int
    head: Optional[int] = None
    raw: list[Optional[float]]
    normalised: list[Optional[float]]
    matches_td: bool


@dataclass
class Circuit:
    max_td_kernel_correlation: float
    max_tabular_kernel_correlation: float
    heads: list[HeadKernel] = detail()
    signatures: Optional[list[Signature]] = detail()
    layer_signatures: Optional[list[Signature]] = detail()
    quantity_r2: Optional[dict[str, Any]] = detail()
    theta_star_quantity_r2: Optional[dict[str, Any]] = detail()


@dataclass
class Convergence:
    context_lengths: list[int] = detail()
    context: dict[str, list[float]] = detail()
    depth: dict[str, list[float]] = detail()
    depth_msve: Optional[dict[str, list]] = detail()
    theta_star_fit: Optional[dict[str, float]] = None
    one_minus_C: Optional[float] = None
    theta_star_limit: Optional[dict[str, Any]] = detail()


@dataclass
class TheirReadings:
    """The predecessor's own metrics of a linear model, as its code computes them
    (``analyses.metrics.predecessor_metrics``), beside this project's family fit."""

    IWS: Interval
    SS: Interval
    VD: Interval
    alpha: float  # the hard TD model's step in VD
    alpha_from: str  # where that step came from
    random_IWS: Interval  # IWS of random layers of the model's norms: the chance level
    layers: list[dict[str, float]] = detail()  # per unique layer: their compare_P / compare_Q readings
    logged: Optional[dict[str, float]] = detail()  # what their trainer logged at the imported step


@dataclass
class LinearFamily:
    """The predecessor's family (linear-ictd models): how much of the model's function the identified member
    explains, whether its (last) layer's update converges when iterated on the evaluation contexts, and
    the weights for the figure."""

    function_r2: float
    iteration: dict[str, Any]
    weights: dict[str, Any] = detail()
    theirs: Optional[TheirReadings] = None


@dataclass
class Curves:
    """The run's logged evaluation metrics over training (``metrics.jsonl``), one entry per logged step; the
    weight readings only where the architecture has them (stylised)."""

    step: list[int]
    eval_msve: list[Optional[float]]
    cos_A: Optional[list] = None
    cos_V: Optional[list] = None
    kernel_diagonality_mean: Optional[list] = None
    kernel_diagonality_heads: Optional[list] = None


@dataclass(kw_only=True)  # fields in summary.json's order
class Example:
    """What the figures draw beyond the tables: one prompt's attention patterns (the standard model's most
    TD-like head, ``best_head``) and grouped kernel, and every query's prediction (by predictor) against ``v_pi``."""

    best_head: Optional[list[int]] = None
    pattern_model: Optional[list] = None
    pattern_theta_star: Optional[list] = None
    grouped_kernel: Optional[list] = None
    predicted: dict[str, list]
    true: list


@dataclass
class Summary:
    """Everything ``ictd-interp analyze`` measured on one model (docs/theory.md §7, README "Analyses")."""

    source: str = field(metadata={"detail": True})  # the path or name analysed (a study's cells differ by it)
    config: dict[str, Any]  # the TrainConfig (TrainConfig.to_dict): the tasks and the training that made it
    model_config: dict[str, Any]
    n_eval_tasks: int
    eval_tasks: str
    metrics: EvalMetrics
    baselines: Baselines
    diagonality: Diagonality
    convergence: Convergence
    circuit: Circuit
    algorithm: Algorithm
    architecture: str = "stylised"
    probes: Optional[Probes] = None
    margin: Optional[Margin] = None
    neu: Optional[dict[str, Any]] = detail()
    linear: Optional[LinearFamily] = None
    curves: Optional[Curves] = detail()
    example: Optional[Example] = detail()
    schema_version: int = SCHEMA_VERSION

    @property
    def model(self) -> Any:
        """The model's config, typed (``ICTDConfig``, ``StandardConfig`` or ``LinearICTDConfig``): renderers read
        its fields as attributes."""
        return MODEL_CONFIGS[self.architecture].from_dict(self.model_config)

    @property
    def gamma(self) -> float:
        return self.config.get("tasks", self.config)["gamma"]  # a summary of an earlier release: a flat config


# ---- reading and writing ------------------------------------------------------------------------------------


def to_json(value: Any) -> Any:
    """JSON-ready: dataclasses as dicts without the fields that do not apply (None), NaN and inf as null."""
    if is_dataclass(value):
        return {f.name: to_json(getattr(value, f.name)) for f in fields(value) if getattr(value, f.name) is not None}
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_summary(summary: Summary, path: Union[str, Path]) -> None:
    Path(path).write_text(json.dumps(to_json(summary), indent=1))


def read_summary(path: Union[str, Path]) -> Summary:
    """``summary.json`` read and typed; a file that does not match names the file and the field."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: corrupt or truncated JSON ({err})") from None
    try:
        return build(Summary, upgraded(data))
    except (TypeError, ValueError, KeyError) as err:
        raise ValueError(f"{path}: not a summary of this release's schema ({err})") from None


def upgraded(data: dict[str, Any]) -> dict[str, Any]:
    """A summary of schema 1 or 2 in this schema's names: the extrapolation's construction curve, stored as
    ``theta_star`` (a linear model's TD(0) construction included), becomes ``reference``."""
    ext = (data.get("algorithm") or {}).get("extrapolation")
    if isinstance(ext, dict) and "theta_star" in ext:
        name = "TD(0) construction" if data.get("architecture") == "linear-ictd" else "theta*"
        ext = {**{k: v for k, v in ext.items() if k != "theta_star"}, "reference": ext["theta_star"],
               "reference_name": name}
        data = {**data, "algorithm": {**data["algorithm"], "extrapolation": ext}}
    return data


def build(cls: Any, data: Any, where: str = "") -> Any:
    """``data`` (parsed JSON) as an instance of the type ``cls``, recursively along the type hints."""
    origin, args = typing.get_origin(cls), typing.get_args(cls)
    if origin in (Union, types.UnionType):
        if data is None:
            return None
        return build(next(a for a in args if a is not type(None)), data, where)
    if is_dataclass(cls):
        if not isinstance(data, dict):
            raise ValueError(f"{where or cls.__name__}: expected a table, got {type(data).__name__}")
        hints = typing.get_type_hints(cls)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{where or cls.__name__}: unknown field(s) {unknown}")
        missing = [f.name for f in fields(cls) if f.name not in data and f.default is MISSING
                   and f.default_factory is MISSING]
        if missing:
            raise ValueError(f"{where or cls.__name__}: missing field(s) {missing}")
        return cls(**{k: build(hints[k], v, f"{where}.{k}".lstrip(".")) for k, v in data.items()})
    if origin is list and args and data is not None:
        return [build(args[0], v, where) for v in data]
    if origin is dict and len(args) == 2 and data is not None:
        return {k: build(args[1], v, f"{where}.{k}") for k, v in data.items()}
    if cls is float and data is None:
        return math.nan  # written as null (NaN or inf)
    return data


# ---- tables ---------------------------------------------------------------------------------------------------


def flatten(summary: Summary) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(cell-level scalars, one dict per layer)``: every non-detail field by its dotted path."""
    n_layers = summary.model_config["n_layers"]  # also in summaries of earlier releases, whatever their config
    scalars: dict[str, Any] = {}
    layers: list[dict[str, Any]] = [{} for _ in range(n_layers)]

    def walk(value: Any, key: str, meta: Any) -> None:
        if value is None or meta.get("detail"):
            return
        if meta.get("per_layer"):
            for layer, item in enumerate(value[:n_layers]):
                layers[layer].update(_layer_entries(item, key, meta.get("names")))
        elif is_dataclass(value):
            for f in fields(value):
                walk(getattr(value, f.name), f"{key}.{f.name}".lstrip("."), f.metadata)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{key}.{k}", {})
        elif not isinstance(value, list):
            scalars[key] = value

    for f in fields(summary):
        if f.name not in ("config", "model_config", "schema_version"):
            walk(getattr(summary, f.name), f.name, f.metadata)
    return scalars, layers


def _layer_entries(item: Any, key: str, names: Optional[tuple[str, ...]]) -> dict[str, Any]:
    if isinstance(item, dict):
        return {f"{key}.{k}": v for k, v in item.items() if not isinstance(v, (list, dict))}
    if isinstance(item, list):
        if len(item) == 1:  # one head
            return {key: item[0]}
        return {f"{key}.{name}": v for name, v in zip(names or range(len(item)), item)}
    return {key: item}


@dataclass(frozen=True)
class Column:
    """One column of a study's table: the flattened field it shows, how a cell's layers reduce to one value
    (``first``, ``min``, ``last``, ``all``) and how the cells of a condition are summarised (``interval``:
    mean with its t interval over seeds; ``count``: seeds where true; ``verdicts``: paired verdicts)."""

    label: str
    key: str
    over_layers: str = "first"
    over_seeds: str = "interval"


STUDY_COLUMNS = (
    Column("eval MSVE", "metrics.eval_msve"),
    Column("θ* MSVE", "metrics.theta_star_msve"),
    Column("min cos(A, A*)", "metrics.cos_A", "min"),
    Column("min cos(V, V*)", "metrics.cos_V", "min"),
    Column("max ‖A − A*‖/‖A*‖", "metrics.dist_A", "max"),
    Column("max ‖V − V*‖/‖V*‖", "metrics.dist_V", "max"),
    Column("kernel diagonality", "metrics.kernel_diagonality_mean"),
    Column("most TD-like head (correlation)", "circuit.max_td_kernel_correlation"),
    Column("most same-state head (correlation)", "circuit.max_tabular_kernel_correlation"),
    Column("signature (+, +, −) in every layer", "metrics.signature_match", "all", "count"),
    Column("effective discount", "algorithm.layers.effective_discount", "last"),
    Column("converges when iterated", "algorithm.extrapolation.converges", "first", "count"),
    Column("best softmax TD, MSVE", "baselines.estimators.best_softmax_td.msve.mean"),
    Column("constant baseline, MSVE", "baselines.estimators.constant.msve.mean"),
    Column("better than the constant (paired, per seed)",
           "baselines.estimators.constant.model_minus_baseline.verdict", "first", "verdicts"),
)
SIGNATURE_COLUMNS = tuple(f"metrics.signature.{name}" for name in SIGNATURE_INPUTS)


def eval_tasks_label(config: Any, n_tasks: int) -> str:
    """Which tasks every number of a report is computed on (one set for the whole report)."""
    t = config.tasks
    return (f"{n_tasks} held-out {t.family} tasks (evaluation seed {config.eval_seed}; s = {t.n_states}, "
            f"d = {t.d_features}, n = {t.context_len}, γ = {t.gamma}, {t.feature_kind} features × {t.feature_scale})")
