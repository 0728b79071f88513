"""A method's output scored against a case's ground truth: the numbers of one (method, case, seed) cell.

Edge methods: ``auroc`` and ``auprc`` of the ranking against the true edges, and where the method returns a
circuit its ``precision``, ``recall``, size and ``faithfulness`` (``scores.faithfulness``). Direction methods:
per ``(variable, site)`` the principal ``angle`` (degrees) to the true direction, and ``r2``, the share of the
true variable's variance on held-out tasks that the one-dimensional read-out ``resid · direction`` explains
(affine fit), ``iia``, the interchange-intervention accuracy of the direction (``interchange_r2``), and
``placebo_iia``, the same under TransformerLens's norm-matched placebo (``placebo_move``);
``angle``, ``r2`` and ``iia`` are then averaged over the variable's sites and ``max_angle`` is the worst.
Feature methods, on the cases with superposed features: per site the ``mcc`` of the method's latents on
held-out prompts against the true features (``scores.matched_correlations``) and ``cosine``, the mean |cos| of
each matched latent's decoder direction with its feature's write direction (a feature left unmatched counting 0);
both averaged over the sites. Besides the numbers, what the figures are drawn from: an edge method's ROC curve
(``roc``), a direction method's ``|cos|`` with every axis of the unrotated basis (``cosines``), a feature method's
per-site MCC (``per_site``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Union

import torch

from ictd_interp.analyses.methods_benchmark.cases import (
    Case,
    counterfactual_labels,
    feature_values,
    residual_sites,
    variable_values,
)
from ictd_interp.analyses.methods_benchmark.faithfulness import size_scores
from ictd_interp.analyses.methods_benchmark.graph import build_graph
from ictd_interp.analyses.methods_benchmark.guard import guarded
from ictd_interp.analyses.methods_benchmark.methods import (
    DIRECTIONS,
    FEATURES,
    DirectionOutput,
    EdgeOutput,
    Encoder,
    FeatureOutput,
    Method,
    patched_prediction,
    runs,
)
from ictd_interp.analyses.methods_benchmark.scores import (
    MethodFailed,
    angle_degrees,
    auroc,
    average_precision,
    faithfulness,
    matched_correlations,
    roc_curve,
)
from ictd_interp.analyses.metrics.draws import case_seed
from ictd_interp.analyses.metrics.interchange import Move, move_accuracies, swap_move
from ictd_interp.analyses.metrics.site_probes import residual_stack


@dataclass(frozen=True)
class Roc:
    fpr: list[float]
    tpr: list[float]


@dataclass(frozen=True, kw_only=True)
class EdgeScores:
    """An edge method on one cell: its ranking's ``auroc``, ``auprc`` and ROC curve, the nodes' ``node_auroc``,
    faithfulness over circuit size (``cpr``, ``cmd`` under resampling, ``cmd_mean`` and ``cmd_zero``:
    ``faithfulness.size_scores``); for a method that returns a circuit, its ``precision``, ``recall``, size
    ``circuit_edges`` and ``faithfulness``. Cells saved before a score existed read it as None."""

    auroc: float
    auprc: float
    roc: Roc
    node_auroc: Optional[float] = None
    cpr: Optional[float] = None
    cmd: Optional[float] = None
    cmd_mean: Optional[float] = None
    cmd_zero: Optional[float] = None
    precision: Optional[float] = None
    recall: Optional[float] = None
    circuit_edges: Optional[float] = None
    faithfulness: Optional[float] = None


@dataclass(frozen=True)
class VariableScores:
    """One variable's direction: mean and worst principal ``angle`` (degrees) over its sites, read-out ``r2``,
    interchange accuracy ``iia`` and the same for the norm-matched placebo, ``placebo_iia`` (means over the
    sites)."""

    angle: float
    max_angle: float
    r2: float
    iia: float
    placebo_iia: Optional[float] = None  # under TransformerLens's placebo (``placebo_move``); None before TL 4.3


@dataclass(frozen=True)
class Cosines:
    """``|cos|`` of each direction found (``labels``: variable @ site) with every unrotated basis ``axes``."""

    labels: list[str]
    axes: list[str]
    matrix: list[list[float]]


@dataclass(frozen=True)
class DirectionScores:
    variables: dict[str, VariableScores]
    cosines: Cosines


@dataclass(frozen=True)
class FeatureScores:
    """Superposed features recovered: ``mcc`` and decoder ``cosine`` averaged over the sites, ``per_site`` MCC
    (in site order), the number of ``features`` at the last site and of ``latents`` there."""

    mcc: float
    cosine: float
    per_site: list[float]
    features: int
    latents: int


Scores = Union[EdgeScores, DirectionScores, FeatureScores]


@dataclass(frozen=True)
class CellResult:
    """One ``(case, seed)`` cell of the benchmark (``cells/{case}-s{seed}.json``): every method's scores."""

    case: str
    seed: int
    edges: int
    true_edges: int
    scores: dict[str, Scores]
    failed: dict[str, str] = field(default_factory=dict)  # method -> why it was not scored (its output not finite)
    seconds: dict[str, float] = field(default_factory=dict)  # method -> its run and scoring on this cell, wall
    circuit: Optional[list[float]] = None  # faithfulness.circuit_check: the planted edges, jointly; less one


def score_edges(case: Case, output: EdgeOutput) -> EdgeScores:
    edges = build_graph(case.model).edges
    missing = [e for e in edges if e not in output.scores]
    if missing:
        raise ValueError(f"edge method: no score for {len(missing)} of {len(edges)} edges (first: {missing[0]})")
    scores = {e: float(output.scores[e]) for e in edges}
    fpr, tpr = roc_curve(scores, case.truth.edges)
    r = runs(case)
    ranking = {
        "auroc": auroc(scores, case.truth.edges),
        "auprc": average_precision(scores, case.truth.edges),
        "roc": Roc(fpr, tpr),
        **size_scores(case, r, scores),
    }
    if output.circuit is None:
        return EdgeScores(**ranking)
    found, true = set(output.circuit), case.truth.edges
    kept = patched_prediction(case, r, set(edges) - found)
    return EdgeScores(
        **ranking,
        precision=len(found & true) / max(len(found), 1),
        recall=len(found & true) / len(true),
        circuit_edges=float(len(found)),
        faithfulness=faithfulness(kept, r.pred, r.pred_corrupted),
    )


def _r2(readout: torch.Tensor, target: torch.Tensor) -> float:
    """The variance of ``target`` explained by an affine function of ``readout`` (1-D least squares)."""
    x, y = readout.reshape(-1) - readout.mean(), target.reshape(-1) - target.mean()
    if float(y.pow(2).sum()) == 0.0:
        raise ValueError("r2: the variable is constant on these tasks")
    if float(x.pow(2).sum()) == 0.0:
        return 0.0
    return float((x @ y) ** 2 / (x.pow(2).sum() * y.pow(2).sum()))


def placebo_move(direction: torch.Tensor, seed: int) -> Optional[Move]:
    """TransformerLens's control for ``swap_move(direction)``: its ``NormMatchedPlacebo`` moves every position
    exactly as far as the swap moves it, but inside a random direction (``random_basis``, seeded): what
    displacement alone buys. None where TransformerLens has no ``tools.analysis.interchange`` (before 4.3)."""
    try:
        from transformer_lens.tools.analysis.interchange import NormMatchedPlacebo, SubspaceInterchange, random_basis
    except ImportError:
        return None
    u = direction.double() / direction.double().norm()
    return NormMatchedPlacebo(SubspaceInterchange(u[:, None]), random_basis(u.shape[0], 1, seed).double())


def interchange_accuracies(case: Case, variable: str, site: str, moves: dict[str, Move]) -> dict[str, float]:
    """Each move's IIA on held-out pairs (``interchange.move_accuracies``): the planted model's prediction with the
    residual at ``site`` moved, against the causal model's counterfactual (``counterfactual_labels``)."""
    labels = counterfactual_labels(case, case.held_out, variable, site)
    return move_accuracies(case.model, case.held_out, site, labels, moves)


def interchange_r2(case: Case, variable: str, site: str, direction: torch.Tensor) -> float:
    """Interchange-intervention accuracy of ``direction`` (``swap_move``) on held-out pairs."""
    return interchange_accuracies(case, variable, site, {"swap": swap_move(direction)})["swap"]


def placebo_r2(case: Case, variable: str, site: str, direction: torch.Tensor, seed: int) -> Optional[float]:
    """``interchange_r2`` under ``placebo_move`` in place of the swap; None before TransformerLens 4.3."""
    move = placebo_move(direction, seed)
    return None if move is None else interchange_accuracies(case, variable, site, {"placebo": move})["placebo"]


def score_directions(case: Case, output: DirectionOutput) -> DirectionScores:
    """Every variable the method returns a direction for is scored at every site where it lies exactly."""
    resid = residual_stack(case.model, case.held_out.prompt)
    values, sites = variable_values(case, case.held_out), residual_sites(case.model)
    claimed = sorted({name for name, _ in output.directions})
    unknown = [n for n in claimed if n not in case.truth.directions]
    if not claimed or unknown:
        raise ValueError(f"direction method: returns {claimed}; the variables are {sorted(case.truth.directions)}")
    variables = {}
    for name in claimed:
        angles, r2s, iia, placebo = [], [], [], []
        for site in case.truth.sites[name]:
            found = output.directions.get((name, site))
            if found is None:
                raise ValueError(f"direction method: no direction for {name!r} at {site}")
            s = sites.index(site)
            angles.append(angle_degrees(found, case.truth.directions[name]))
            r2s.append(_r2(resid[s] @ found.double(), values[name][s]))
            moves = {"swap": swap_move(found), "placebo": placebo_move(found, case_seed(case.seed, s))}
            accuracy = interchange_accuracies(case, name, site, {k: m for k, m in moves.items() if m is not None})
            iia.append(accuracy["swap"])
            placebo.append(accuracy.get("placebo"))
        variables[name] = VariableScores(
            sum(angles) / len(angles),
            max(angles),
            sum(r2s) / len(r2s),
            sum(iia) / len(iia),
            None if None in placebo else sum(placebo) / len(placebo),
        )
    found = torch.stack([d.double() / d.norm() for d in output.directions.values()])
    cosines = Cosines(
        [f"{name} @ {site}" for name, site in output.directions],
        basis_labels(case),
        (found @ case.rotation.T).abs().tolist(),
    )  # |cos| with every unrotated basis axis
    return DirectionScores(variables, cosines)


@torch.no_grad()
def score_features(case: Case, output: FeatureOutput) -> FeatureScores:
    """MCC and decoder cosine at every site where the case's features lie, on the held-out prompts."""
    resid, sites = residual_stack(case.model, case.held_out.prompt), residual_sites(case.model)
    truth = feature_values(case, case.held_out)
    missing = [s for s in truth if s not in output.encoders or s not in output.decoders]
    if missing:
        raise ValueError(f"feature method: no encoder or decoder at {missing}")
    mccs, cosines, latents = [], [], 0
    for site, true in truth.items():
        codes = output.encoders[site](resid[sites.index(site)].reshape(-1, resid.shape[-1]))
        decoder = output.decoders[site].double()
        if codes.shape != (true.shape[0], decoder.shape[0]):
            raise ValueError(
                f"feature method: at {site} {tuple(codes.shape)} latents for {true.shape[0]} samples and "
                f"{decoder.shape[0]} decoder rows"
            )
        mcc, match = matched_correlations(true, codes)
        unit = decoder / decoder.norm(dim=-1, keepdim=True).clamp_min(1e-300)
        features, latent = torch.tensor(list(match)), torch.tensor(list(match.values()))
        matched = (unit[latent] * case.truth.features[site][features]).sum(-1).abs()
        cosines.append(float(matched.sum()) / true.shape[1])
        mccs.append(mcc)
        latents = decoder.shape[0]
    return FeatureScores(sum(mccs) / len(mccs), sum(cosines) / len(cosines), mccs, true.shape[1], latents)


def basis_labels(case: Case) -> list[str]:
    """Names of the unrotated residual axes: the features, the reward, target and value rows, the junk."""
    d, junk = case.spec.d_features, case.spec.junk_dims
    return [f"φ{i + 1}" for i in range(d)] + ["reward", "target", "value"] + [f"junk {i + 1}" for i in range(junk)]


def score_method(method: Method, case: Case, sealed_seed: Optional[int] = None) -> Optional[Scores]:
    """Run ``method`` on ``case`` and score what it returns (None: a feature method on a case without features, a
    direction method on a case without exact directions). The method gets a ``Problem`` (``guarded``), never
    the case. It fails (``MethodFailed``), never scored, when it raises, edits what it was given in place, or
    returns something that cannot be scored: the wrong kind of output, a missing edge or site, a zero or
    non-finite direction or decoder, an encoder that raises, or any score that comes out non-finite."""
    if not asked(method, case.truth.features, case.truth.sites):
        return None
    return score_output(method.name, method.kind, case, guarded(method, case, sealed_seed))


def asked(method: Method, features, sites) -> bool:
    """Whether a case asks what ``method`` answers: features where some are planted, directions where variables
    lie on exact directions, edges always (a ``Problem`` holds both as ``feature_sites``, ``variable_sites``)."""
    return not (method.kind == FEATURES and not features or method.kind == DIRECTIONS and not sites)


def check_kind(name: str, kind: str, output: object) -> None:
    """``MethodFailed`` unless ``output`` is what a method of ``kind`` returns."""
    expected = {FEATURES: FeatureOutput, DIRECTIONS: DirectionOutput}.get(kind, EdgeOutput)
    if not isinstance(output, expected):
        raise MethodFailed(
            f"method {name!r}: its kind ({kind}) returns {expected.__name__}, got {type(output).__name__}"
        )
    code = [site for site, e in getattr(output, "encoders", {}).items() if not isinstance(e, Encoder)]
    if code:
        raise MethodFailed(
            f"method {name!r}: the encoders at {code[:3]} are not Encoder data (weights, bias, center, activation); "
            "a feature method sends its encoder as tensors, never as code"
        )


def score_output(name: str, kind: str, case: Case, output: object) -> Scores:
    """Method ``name``'s output (of its ``kind``) on ``case`` scored, or ``MethodFailed`` where it cannot be
    (``score_method``); the method itself is not needed, so the scorer never imports a plugin."""
    check_kind(name, kind, output)
    score = {FEATURES: score_features, DIRECTIONS: score_directions}.get(kind, score_edges)
    _check_vectors(name, output)
    try:
        scores = score(case, output)
    except MethodFailed:
        raise
    except Exception as err:  # a missing edge or site, an encoder that raises, a shape that does not fit
        raise MethodFailed(f"method {name!r}: its output cannot be scored ({type(err).__name__}: {err})") from err
    bad = [path for path, value in _numbers(scores) if not math.isfinite(value)]
    if bad:
        raise MethodFailed(f"method {name!r}: its output scores non-finite at {', '.join(bad[:3])}")
    return scores


def _check_vectors(name: str, output: object) -> None:
    """Directions and decoder rows must be finite and non-zero (a zero direction has no angle); an encoder's
    tensors finite."""
    for site, encoder in getattr(output, "encoders", {}).items():
        if not all(bool(torch.isfinite(t).all()) for t in encoder.tensors()):
            raise MethodFailed(f"method {name!r}: the encoder at {site} is not finite")
    vectors = getattr(output, "directions", None) or getattr(output, "decoders", None) or {}
    for key, vector in vectors.items():
        vector = torch.as_tensor(vector)
        if not bool(torch.isfinite(vector).all()) or bool(
            (vector.reshape(-1, vector.shape[-1]).norm(dim=-1) == 0).any()
        ):
            raise MethodFailed(f"method {name!r}: the vector at {key} is zero or not finite")


def _numbers(value: object, path: str = "") -> list[tuple[str, float]]:
    """Every float in a score dataclass (nested lists and dicts included), with where it sits."""
    if isinstance(value, float):
        return [(path, value)]
    if isinstance(value, dict):
        return [n for k, v in value.items() for n in _numbers(v, f"{path}.{k}")]
    if isinstance(value, (list, tuple)):
        return [n for i, v in enumerate(value) for n in _numbers(v, f"{path}[{i}]")]
    if hasattr(value, "__dataclass_fields__"):
        return [n for f in value.__dataclass_fields__ for n in _numbers(getattr(value, f), f"{path}.{f}".lstrip("."))]
    return []
