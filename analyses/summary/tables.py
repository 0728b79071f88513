"""Study tables from the schema: ``flatten`` opens every section along the declared types — a field declared
``per_layer`` becomes one value per layer, ``detail`` fields stay in ``summary.json`` — and ``STUDY_COLUMNS``
names, for each column of a study's table, which flattened field it shows and how it aggregates over layers;
``summary_column`` checks any such path against the types (the claims and study reports name their columns
through it, so a renamed field fails at import, not as a silently empty column)."""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, Optional, Union

from ictd_interp.analyses.metrics.intervals import COSINE, NONNEGATIVE
from ictd_interp.analyses.summary.sections import Summary
from ictd_interp.analyses.summary.store import written
from ictd_interp.models.stylised.theta_star import SIGNATURE_INPUTS


def flatten(summary: Summary) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(cell-level scalars, one dict per layer)``: every non-detail field by its dotted path."""
    n_layers = summary.model_config["n_layers"]  # also in summaries of earlier releases, whatever their config
    scalars: dict[str, Any] = {}
    layers: list[dict[str, Any]] = [{} for _ in range(n_layers)]
    for f in fields(summary):
        if f.name not in ("config", "model_config", "schema_version"):
            _walk(getattr(summary, f.name), f.name, f.metadata, scalars, layers)
    return scalars, layers


def _walk(value: Any, key: str, meta: Any, scalars: dict[str, Any], layers: list[dict[str, Any]]) -> None:
    """Add ``value`` (at dotted path ``key``, with its field's metadata) to ``scalars`` or, per layer, ``layers``."""
    if value is None or meta.get("detail"):
        return
    if meta.get("per_layer"):
        for layer, item in enumerate(value[: len(layers)]):
            layers[layer].update(_layer_entries(item, key, meta.get("names")))
    elif is_dataclass(value):
        for f in fields(value):
            _walk(getattr(value, f.name), f"{key}.{f.name}".lstrip("."), f.metadata, scalars, layers)
    elif isinstance(value, dict):
        for k, v in value.items():
            _walk(v, f"{key}.{k}", {}, scalars, layers)
    elif not isinstance(value, list):
        scalars[key] = value


def _layer_entries(item: Any, key: str, names: Optional[tuple[str, ...]]) -> dict[str, Any]:
    if is_dataclass(item):
        return {f"{key}.{k}": v for k, v in written(item) if not isinstance(v, (list, dict)) and not is_dataclass(v)}
    if isinstance(item, dict):
        return {f"{key}.{k}": v for k, v in item.items() if not isinstance(v, (list, dict))}
    if isinstance(item, list):
        if len(item) == 1:  # one head
            return {key: item[0]}
        return {f"{key}.{name}": v for name, v in zip(names or range(len(item)), item)}
    return {key: item}


def summary_column(path: str) -> str:
    """``path``, a flattened field (``flatten``: how a study's ``results.csv`` names its columns), checked against
    the schema's types: each name a field of the dataclass reached so far, any key of a table (``dict``), the
    element type of a list (per layer). A path the schema does not declare raises at import of its reader."""
    kind: Any = Summary
    for name in path.split("."):
        kind = _element(kind)
        if typing.get_origin(kind) is dict:
            kind = typing.get_args(kind)[1]
        elif is_dataclass(kind) and name in {f.name for f in fields(kind)}:
            kind = typing.get_type_hints(kind)[name]
        else:
            options = [a for a in typing.get_args(kind) if is_dataclass(a) and name in {f.name for f in fields(a)}]
            if not options:
                raise ValueError(f"{path}: the summary schema has no field {name!r} there")
            kind = typing.get_type_hints(options[0])[name]
    return path


def _element(kind: Any) -> Any:
    """Through Optional and list to the type a flattened path continues in."""
    while True:
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        origin = typing.get_origin(kind)
        if origin in (Union, types.UnionType) and len(args) == 1 or origin is list:
            kind = args[0]
        else:
            return kind


@dataclass(frozen=True)
class Column:
    """One column of a study's table: the flattened field it shows, how a cell's layers reduce to one value
    (``first``, ``min``, ``last``, ``all``) and how the cells of a condition are summarised (``interval``:
    mean with its t interval over seeds; ``count``: seeds where true; ``verdicts``: paired verdicts; ``tally``:
    how many seeds gave each word), and the
    range its values can take, which cuts their interval (``t_interval``'s ``bounds``)."""

    label: str
    key: str
    over_layers: str = "first"
    over_seeds: str = "interval"
    bounds: Optional[tuple[float, float]] = None

    def __post_init__(self) -> None:
        summary_column(self.key)


STUDY_COLUMNS = (
    Column("learns in context (seeds)", "in_context.learns_in_context", "first", "count"),
    Column(
        "better than first-visit MC (paired, per seed)",
        "baselines.estimators.first_visit_mc.model_minus_baseline.verdict",
        "first",
        "verdicts",
    ),
    Column("iterated to 4× depth (per seed)", "in_context.iterated.verdict", "first", "tally"),
    Column("eval MSVE", "metrics.eval_msve", bounds=NONNEGATIVE),
    Column("first-visit MC, MSVE", "baselines.estimators.first_visit_mc.msve.mean", bounds=NONNEGATIVE),
    Column("θ* MSVE", "metrics.theta_star_msve", bounds=NONNEGATIVE),
    Column("min cos(A, A*)", "metrics.cos_A", "min", bounds=COSINE),
    Column("min cos(V, V*)", "metrics.cos_V", "min", bounds=COSINE),
    Column("max ‖A − A*‖/‖A*‖", "metrics.dist_A", "max", bounds=NONNEGATIVE),
    Column("max ‖V − V*‖/‖V*‖", "metrics.dist_V", "max", bounds=NONNEGATIVE),
    Column("kernel diagonality", "metrics.kernel_diagonality_mean"),
    Column("most TD-like head (correlation)", "circuit.max_td_kernel_correlation", bounds=COSINE),
    Column("most same-state head (correlation)", "circuit.max_tabular_kernel_correlation", bounds=COSINE),
    Column("signature (+, +, −) in every layer", "metrics.signature_match", "all", "count"),
    Column("effective discount", "algorithm.layers.effective_discount", "last"),
    Column("converges when iterated", "algorithm.extrapolation.converges", "first", "count"),
    Column("best softmax TD, MSVE", "baselines.estimators.best_softmax_td.msve.mean", bounds=NONNEGATIVE),
    Column("constant baseline, MSVE", "baselines.estimators.constant.msve.mean", bounds=NONNEGATIVE),
    Column(
        "better than the constant (paired, per seed)",
        "baselines.estimators.constant.model_minus_baseline.verdict",
        "first",
        "verdicts",
    ),
)
SIGNATURE_COLUMNS = tuple(f"metrics.signature.{name}" for name in SIGNATURE_INPUTS)
