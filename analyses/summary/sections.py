"""The summary's sections: one dataclass per section of ``summary.json`` (``store`` writes and reads them).

``compute`` of each architecture's report (``ictd_interp.analyses.reports``) fills a ``Summary``; the leaves are the
metrics' own typed results (``LayerReading``, ``IterationMap``, ``Extrapolation``, ...), so renderers, study
tables and claims read every number by attribute. Fields marked ``per_layer`` are lists indexed by layer,
``detail`` fields (curves, examples, full tables) stay in ``summary.json`` and are not tabulated (``tables``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from ictd_interp.analyses.metrics.acting import Acting
from ictd_interp.analyses.metrics.algorithm_id import IterationMap, LayerReading
from ictd_interp.analyses.metrics.baselines import Baselines
from ictd_interp.analyses.metrics.convergence import GeometricFit
from ictd_interp.analyses.metrics.extrapolation import Extrapolation
from ictd_interp.analyses.metrics.heads import HeadKernel, Signature
from ictd_interp.analyses.metrics.in_context import InContext
from ictd_interp.analyses.metrics.intervals import Interval
from ictd_interp.analyses.metrics.linear_family import FamilyIteration, FamilyReading
from ictd_interp.analyses.metrics.neu import NeuGrid
from ictd_interp.analyses.metrics.predecessor_metrics import WeightReadings
from ictd_interp.analyses.metrics.readings import WeightReading
from ictd_interp.analyses.metrics.theta_star_limit import DepthLimit
from ictd_interp.config.train import MODEL_CONFIGS, TrainConfig
from ictd_interp.training.evaluation import DETAIL, PER_LAYER, EvalMetrics

SCHEMA_VERSION = 3  # 1: the untyped summary of earlier releases; 2: extrapolation's reference curve named
# "theta_star" whatever it was (both read: ``upgraded``)


def per_layer(names: Optional[tuple[str, ...]] = None, default: Any = None) -> Any:
    """A list indexed by layer; ``names`` label the entries of each layer's inner list."""
    return field(default=default, metadata={**PER_LAYER, "names": names})


def detail(default: Any = None) -> Any:
    """Kept in summary.json for figures and readers, not tabulated."""
    return field(default=default, metadata=DETAIL)


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
class Algorithm:
    """Which algorithm each layer runs, and what iterating the last layer does."""

    layers: Optional[list[Union[LayerReading, FamilyReading]]] = per_layer()  # a linear model: its family's
    source: Optional[str] = None  # "weights" (read exactly) or "fit"
    exact_read_unavailable: Optional[str] = None
    extrapolation: Optional[Extrapolation] = None
    theta_star_map: Optional[IterationMap] = None
    layers_tabular: Optional[list[LayerReading]] = detail()


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
class DepthCurves:
    """An error per site (embedding, then after each layer) for the model and the constructions beside it."""

    model: list[float]
    theta_star: Optional[list[float]] = None
    td0: Optional[list[float]] = None  # a linear model's TD(0) construction
    model_v_pi_probe: Optional[list[float]] = None  # a standard model: a probe fitted to v_pi, not its output


@dataclass
class Convergence:
    context_lengths: list[int] = detail()
    context: dict[str, list[float]] = detail()  # by the legend's label
    depth: DepthCurves = detail()  # sup error
    depth_msve: Optional[DepthCurves] = detail()
    theta_star_fit: Optional[GeometricFit] = None
    one_minus_C: Optional[float] = None
    theta_star_limit: Optional[DepthLimit] = detail()


@dataclass
class TheirReadings:
    """The predecessor's own metrics of a linear model, as its code computes them
    (``ictd_interp.analyses.metrics.predecessor_metrics``), beside this project's family fit."""

    IWS: Interval
    SS: Interval
    VD: Interval
    alpha: float  # the hard TD model's step in VD
    alpha_from: str  # where that step came from
    random_IWS: Interval  # IWS of random layers of the model's norms: the chance level
    layers: list[WeightReadings] = detail()  # per unique layer: their compare_P / compare_Q readings
    logged: Optional[dict[str, float]] = detail()  # what their trainer logged at the imported step


@dataclass
class LinearWeights:
    """Each (unique) layer's ``P`` and ``Q`` on the sign that makes ``P[-1, -1] >= 0``, and the TD(0)
    construction's, for the figure."""

    P: list[list[list[float]]]
    Q: list[list[list[float]]]
    P_td0: list[list[float]]
    Q_td0: list[list[float]]


@dataclass
class LinearFamily:
    """The predecessor's family (linear-ictd models): how much of the model's function the identified member
    explains, whether its (last) layer's update converges when iterated on the evaluation contexts, and
    the weights for the figure."""

    function_r2: float
    iteration: FamilyIteration
    weights: LinearWeights = detail()
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
    """Everything ``ictd-interp analyze`` measured on one model (docs/theory.md §7)."""

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
    in_context: Optional[InContext] = None  # the function-space verdict (ictd_interp.analyses.metrics.in_context)
    readings: Optional[list[WeightReading]] = None  # what the weights say, with each rule's measured AUROC
    acting: Optional[Acting] = None  # a control model's greedy and softmax regret (ictd_interp.analyses.metrics.acting)
    neu: Optional[NeuGrid] = detail()
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
    def training(self) -> TrainConfig:
        """The training config, typed (``TrainConfig.from_dict``: a file of an earlier release migrated)."""
        return TrainConfig.from_dict(self.config)

    @property
    def gamma(self) -> float:
        return self.config.get("tasks", self.config)["gamma"]  # a summary of an earlier release: a flat config
