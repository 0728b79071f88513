"""Command-line flags generated from config dataclasses: a new field is a new flag, no new code.

A flat dataclass gets one ``--flag`` per field; ``TrainConfig`` gets one per flat setting of its nested
configs (``flat_fields``: the model's, the tasks', its own), with ``--architecture`` choosing the model.
"""

from __future__ import annotations

import argparse
import inspect
import re
import textwrap
from dataclasses import MISSING, fields, replace
from typing import Any

from ictd_interp.config import ARCHITECTURES, MODEL_CONFIGS, TaskDistribution, TrainConfig
from ictd_interp.config.registry import FAMILIES, OBJECTIVES, listing
from ictd_interp.config.train import flat_fields


def field_help(cls: type) -> dict[str, str]:
    """Per-field help from the ``Args:`` section of a Google-style class docstring, at any indentation:
    an entry is ``name: text`` at the section's own indentation, continued by more-indented lines."""
    doc = inspect.cleandoc(cls.__doc__ or "")
    section = doc.split("Args:", 1)[1] if "Args:" in doc else ""
    helps: dict[str, str] = {}
    name = None
    for line in textwrap.dedent(section.strip("\n")).splitlines():
        entry = re.match(r"^([A-Za-z_][\w, ]*): (.*)$", line)
        if entry:
            name = entry.group(1)
            for key in name.split(","):
                helps[key.strip()] = entry.group(2).strip()
        elif name and line.strip():
            for key in name.split(","):
                helps[key.strip()] += " " + line.strip()
    lists = {"<families>": listing(FAMILIES), "<objectives>": listing(OBJECTIVES)}  # the registry's, never a copy
    for marker, text in lists.items():
        helps = {k: v.replace(marker, text) for k, v in helps.items()}
    return {k: v.replace("``", "") for k, v in helps.items()}


def _add_flag(group, name: str, default: Any, text: str) -> None:
    flag, text = "--" + name.replace("_", "-"), text.replace("%", "%%")  # argparse formats help with %
    if isinstance(default, bool):
        group.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=text)
    else:
        kind = type(default) if default is not MISSING and default is not None else str
        group.add_argument(flag, dest=name, type=kind, default=None, help=text)


def add_config_args(parser: argparse.ArgumentParser, cls: type, title: str) -> None:
    """One ``--flag`` per field of a dataclass, a nested dataclass field's own fields flat beside them (but those
    the class names in ``not_flags``); flags default to None so only what the user set overrides."""
    group, default = parser.add_argument_group(title), cls()
    for owner, f in _flat(default):
        if owner is not default and f.name in getattr(cls, "not_flags", ()):
            continue
        value = getattr(owner, f.name)
        shown = (
            "the model's"
            if f.name in getattr(cls, "model_defaults", ())
            else repr(value)
            if isinstance(value, str)
            else value
        )
        _add_flag(group, f.name, value, f"{field_help(type(owner)).get(f.name, '')} (default: {shown})".strip())


def _flat(obj: Any) -> list[tuple[Any, Any]]:
    """``(owner, field)`` for every leaf field of ``obj``, nested dataclasses opened."""
    out = []
    for f in fields(obj):
        value = getattr(obj, f.name)
        out += _flat(value) if hasattr(value, "__dataclass_fields__") else [(obj, f)]
    return out


def add_train_args(parser: argparse.ArgumentParser) -> None:
    """One flag per flat ``TrainConfig`` setting, grouped by the config that holds it; defaults are the preset's."""
    homes = {"model": tuple(MODEL_CONFIGS.values()), "tasks": (TaskDistribution,), "train": (TrainConfig,)}
    groups = {
        "model": parser.add_argument_group(f"model ({', '.join(ARCHITECTURES)} architectures)"),
        "tasks": parser.add_argument_group("tasks"),
        "train": parser.add_argument_group("training"),
    }
    groups["model"].add_argument(
        "--architecture",
        choices=ARCHITECTURES,
        default=None,
        help="; ".join(f"{a}: {cls.description}" for a, cls in MODEL_CONFIGS.items()),
    )
    for name, home in flat_fields().items():
        if home == "architecture":
            continue
        owners = [cls for cls in homes[home] if name in {f.name for f in fields(cls)}]
        field_ = next(f for f in fields(owners[0]) if f.name == name)
        text = field_help(owners[0]).get(name, "")
        if home == "model" and len(owners) < len(homes["model"]):
            text = f"{' and '.join(o.architecture for o in owners)} architecture{'s' * (len(owners) > 1)}: {text}"
        _add_flag(groups[home], name, field_.default, f"{text} (default: the preset's)")


def config_from_args(base: Any, args: argparse.Namespace) -> Any:
    """``base`` with every flag the user gave applied (validated by the dataclass)."""
    if isinstance(base, TrainConfig):
        given = {name: getattr(args, name) for name in flat_fields() if getattr(args, name, None) is not None}
        return base.with_flat(**given)
    return _replace_flat(base, {name: value for name, value in vars(args).items() if value is not None})


def _replace_flat(obj: Any, given: dict[str, Any]) -> Any:
    changes = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        if hasattr(value, "__dataclass_fields__"):
            changes[f.name] = _replace_flat(value, given)
        elif f.name in given:
            changes[f.name] = given[f.name]
    return replace(obj, **changes)


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (argparse names the flag in its error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {value}")
    return value
