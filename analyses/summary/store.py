"""``summary.json`` written and read: dataclasses as JSON without the optional fields that do not apply, and
back, typed along the sections' type hints, naming the file and the field on a mismatch."""

from __future__ import annotations

import json
import math
import types
import typing
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path
from typing import Any, Union

from ictd_interp.analyses.summary.sections import Summary


def to_json(value: Any) -> Any:
    """JSON-ready: dataclasses as dicts without the optional fields that do not apply (None; a required field
    is written, as null, even then), NaN and inf as null."""
    if is_dataclass(value):
        return {name: to_json(v) for name, v in written(value)}
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def written(value: Any) -> list[tuple[str, Any]]:
    """A dataclass's ``(name, value)`` pairs as ``summary.json`` holds them: every required field, and the
    optional ones that are not None."""
    return [
        (f.name, getattr(value, f.name))
        for f in fields(value)
        if getattr(value, f.name) is not None or (f.default is MISSING and f.default_factory is MISSING)
    ]


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
        ext = {
            **{k: v for k, v in ext.items() if k != "theta_star"},
            "reference": ext["theta_star"],
            "reference_name": name,
        }
        data = {**data, "algorithm": {**data["algorithm"], "extrapolation": ext}}
    return data


def build(cls: Any, data: Any, where: str = "") -> Any:
    """``data`` (parsed JSON) as an instance of the type ``cls``, recursively along the type hints."""
    origin, args = typing.get_origin(cls), typing.get_args(cls)
    if origin in (Union, types.UnionType):
        return None if data is None else _build_union([a for a in args if a is not type(None)], data, where)
    if is_dataclass(cls) and isinstance(data, cls):
        return data
    if is_dataclass(cls):
        return _build_table(cls, data, where)
    if origin is list and args and data is not None:
        return [build(args[0], v, where) for v in data]
    if origin is dict and len(args) == 2 and data is not None:
        return {k: build(args[1], v, f"{where}.{k}") for k, v in data.items()}
    if cls is float and data is None:
        return math.nan  # written as null (NaN or inf)
    return data


def _build_union(options: list[Any], data: Any, where: str) -> Any:
    """A union of tables: the first type the data fits."""
    for option in options[:-1]:
        try:
            return build(option, data, where)
        except (TypeError, ValueError):
            continue
    return build(options[-1], data, where)


def _build_table(cls: Any, data: Any, where: str) -> Any:
    """A dataclass from its table, refusing unknown and missing fields by name."""
    if not isinstance(data, dict):
        raise ValueError(f"{where or cls.__name__}: expected a table, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(data) - {f.name for f in fields(cls)})
    if unknown:
        raise ValueError(f"{where or cls.__name__}: unknown field(s) {unknown}")
    required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
    missing = [name for name in required if name not in data]
    if missing:
        raise ValueError(f"{where or cls.__name__}: missing field(s) {missing}")
    return cls(**{k: build(hints[k], v, f"{where}.{k}".lstrip(".")) for k, v in data.items()})
