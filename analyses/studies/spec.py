"""Study specs: a preset, fixed overrides, a grid over ``TrainConfig``'s flat settings and a list of seeds.

A spec is a TOML file (read with the standard library)::

    name = "objectives"
    description = "Does theta* emerge under every pretraining objective?"
    preset = "quick"
    seeds = [0, 1, 2, 3, 4]
    [fixed]
    steps = 2000
    [grid]
    objective = ["td", "neu", "mc", "supervised"]

Cells are the cartesian product of the grid's values times the seeds. A grid may also list ``recipe`` names, each a
table of settings under ``[recipes]`` that go together (recipes side by side)::

    [recipes]
    deeper = { n_layers = 96 }
    window = { loss_depths = "32,40,48" }
    [grid]
    recipe = ["deeper", "window"]
 Every cell's ``TrainConfig``
is built when the spec is read, so an unknown field, a bad value or an empty grid is an error that
names the cell and the field before any work starts.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Union

import tomllib

from ictd_interp.config import MODEL_CONFIGS, TaskDistribution
from ictd_interp.config.fields import did_you_mean
from ictd_interp.config.train import PRESETS, TrainConfig, flat_fields

BUILTIN_DIR = Path(__file__).parent
KEYS = ("name", "description", "preset", "seeds", "fixed", "grid", "measured", "recipes")
RECIPE = "recipe"  # the grid key whose values name tables of ``recipes``


class StudySpecError(ValueError):
    """A spec that cannot run; the message names the file, the cell and the field."""


@dataclass(frozen=True)
class Cell:
    """One training run of a study: its folder name, its grid values and its full config."""

    name: str
    condition: str
    overrides: dict[str, Any]
    config: TrainConfig


@dataclass
class StudySpec:
    name: str
    preset: str
    seeds: list[int]
    fixed: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list[Any]] = field(default_factory=dict)
    description: str = ""
    source: str = "<dict>"
    measured: str = ""  # the study's measured wall time, with its machine and date (documentation: never compared)
    recipes: dict[str, dict[str, Any]] = field(default_factory=dict)  # named sets of settings (grid key ``recipe``)

    def __post_init__(self) -> None:
        """The preset and seeds, the recipes, every setting's name, the grid's lists, then every cell's config."""
        where = self.source
        if self.preset not in PRESETS:
            raise StudySpecError(f"{where}: preset: unknown preset {self.preset!r}; choose from {sorted(PRESETS)}")
        if not isinstance(self.seeds, list) or not self.seeds or not all(isinstance(s, int) for s in self.seeds):
            raise StudySpecError(f"{where}: seeds: must be a non-empty list of integers, got {self.seeds!r}")
        if len(set(self.seeds)) != len(self.seeds):
            raise StudySpecError(f"{where}: seeds: repeated seeds in {self.seeds}")
        known = set(flat_fields())
        self._check_recipes(known)
        self._check_setting_names(known)
        self._check_grid()
        self.cells()  # builds (and so validates) every cell's TrainConfig

    def _check_setting_names(self, known: set[str]) -> None:
        where = self.source
        tables = [("fixed", self.fixed), ("grid", {k: v for k, v in self.grid.items() if k != RECIPE})]
        for table, keys in tables + [(f"recipes.{name}", r) for name, r in self.recipes.items()]:
            for key in keys:
                if key == "seed":
                    raise StudySpecError(f"{where}: {table}.seed: list seeds in `seeds = [...]` instead")
                if key not in known:
                    raise StudySpecError(
                        f"{where}: {table}.{key}: unknown TrainConfig setting; known settings are {sorted(known)}"
                    )

    def _check_grid(self) -> None:
        where = self.source
        for key, values in self.grid.items():
            if not isinstance(values, list) or not values:
                raise StudySpecError(f"{where}: grid.{key}: must be a non-empty list of values, got {values!r}")
            if len(set(map(repr, values))) != len(values):
                raise StudySpecError(f"{where}: grid.{key}: repeated values in {values}")
            if key in self.fixed:
                raise StudySpecError(f"{where}: grid.{key}: also set in [fixed]; keep one")

    def _check_recipes(self, known: set[str]) -> None:
        where = self.source
        for name, recipe in self.recipes.items():
            if not isinstance(recipe, dict):
                raise StudySpecError(f"{where}: recipes.{name}: must be a table of TrainConfig settings")
        names = self.grid.get(RECIPE, [])
        unknown = [n for n in names if n not in self.recipes] if isinstance(names, list) else names
        if unknown:
            raise StudySpecError(
                f"{where}: grid.recipe: {unknown!r} not in [recipes] (defined: {sorted(self.recipes)})"
            )
        if self.recipes and RECIPE not in self.grid:
            raise StudySpecError(f"{where}: [recipes] is defined but grid.recipe lists none of them")

    def conditions(self) -> list[dict[str, Any]]:
        """Every combination of grid values, in the order the grid lists them."""
        keys = list(self.grid)
        return [dict(zip(keys, values)) for values in itertools.product(*(self.grid[k] for k in keys))]

    def cells(self) -> list[Cell]:
        out = []
        for condition in self.conditions():
            label = condition_label(condition)
            for seed in self.seeds:
                name = cell_name({**condition, "seed": seed})
                settings = {k: v for k, v in condition.items() if k != RECIPE}
                recipe = self.recipes.get(condition.get(RECIPE), {})
                clash = sorted(set(recipe) & set(settings))
                if clash:
                    raise StudySpecError(f"{self.source}: cell {name}: {clash} set by both the recipe and the grid")
                overrides = {**self.fixed, **recipe, **settings, "seed": seed}
                try:
                    config = TrainConfig.from_preset(self.preset, **_coerce(overrides))
                except (TypeError, ValueError) as err:
                    raise StudySpecError(f"{self.source}: cell {name}: {err}") from None
                out.append(Cell(name, label, {**condition, "seed": seed}, config))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "preset": self.preset,
            "seeds": list(self.seeds),
            "fixed": dict(self.fixed),
            "grid": {k: list(v) for k, v in self.grid.items()},
            **({"recipes": {k: dict(v) for k, v in self.recipes.items()}} if self.recipes else {}),
        }

    def differences(self, other: "StudySpec") -> list[str]:
        mine, theirs = self.to_dict(), other.to_dict()
        keys = [k for k in (*mine, *theirs) if k != "description"]
        return [
            f"{k}: {mine.get(k)!r} -> {theirs.get(k)!r}" for k in dict.fromkeys(keys) if mine.get(k) != theirs.get(k)
        ]

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>") -> "StudySpec":
        unknown = sorted(set(data) - set(KEYS))
        if unknown:
            raise StudySpecError(f"{source}: unknown key(s) {unknown}; a spec has {list(KEYS)}")
        missing = [k for k in ("preset", "seeds") if k not in data]
        if missing:
            raise StudySpecError(f"{source}: missing {missing}")
        for table in ("fixed", "grid", "recipes"):
            if not isinstance(data.get(table, {}), dict):
                raise StudySpecError(f"{source}: [{table}] must be a table of TrainConfig fields")
        return cls(
            name=str(data.get("name", Path(source).stem)),
            preset=data["preset"],
            seeds=data["seeds"],
            fixed=dict(data.get("fixed", {})),
            grid=dict(data.get("grid", {})),
            description=str(data.get("description", "")),
            source=source,
            measured=str(data.get("measured", "")),
            recipes=dict(data.get("recipes", {})),
        )


def builtin_studies() -> dict[str, Path]:
    """Studies shipped with the package, by name."""
    return {p.stem: p for p in sorted(BUILTIN_DIR.glob("*.toml"))}


def spec_size(path: Any) -> str:
    """``12 runs (6 conditions × 2 seeds); 4 min measured on 2 cores ...`` from a spec file, read raw (no cell is
    built): what ``study --help`` lists beside each built-in study."""
    data = tomllib.loads(path.read_text())
    conditions = math.prod(len(v) for v in data.get("grid", {}).values())
    seeds = len(data.get("seeds", []))
    return f"{conditions * seeds} runs ({conditions} condition{'s' * (conditions != 1)} × {seeds} seeds); " + (
        data.get("measured") or "time not measured"
    )


def spec_file(spec: Union[str, Path]) -> Path:
    """The TOML file a spec argument names: a path, or a built-in study's name (torch-free: the command line
    checks it before loading anything)."""
    path = Path(spec)
    if not path.exists():
        builtin = builtin_studies()
        if str(spec) not in builtin:
            raise StudySpecError(
                f"{spec}: no such spec file or built-in study (built-in: {sorted(builtin)})"
                + did_you_mean(str(spec), builtin)
            )
        path = builtin[str(spec)]
    if path.is_dir():
        raise StudySpecError(
            f"{spec}: a folder; give a study spec (a .toml file) or a built-in study's name "
            f"({sorted(builtin_studies())})"
        )
    return path


def load_spec(spec: Union[str, Path, dict, StudySpec]) -> StudySpec:
    """A spec from a ``StudySpec``, a dict, a TOML file path or a built-in study's name."""
    if isinstance(spec, StudySpec):
        return spec
    if isinstance(spec, dict):
        return StudySpec.from_dict(spec)
    path = spec_file(spec)
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise StudySpecError(f"{path}: not valid TOML ({err})") from None
    return StudySpec.from_dict(data, source=str(path))


def stored_spec(out_dir: Path) -> StudySpec:
    """The spec a study folder was run with (its ``spec.json``), each way it can be damaged named."""
    path = Path(out_dir) / "spec.json"
    if not path.exists():
        raise FileNotFoundError(f"{out_dir}: not a study folder (no spec.json)")
    try:
        return load_spec(json.loads(path.read_text()))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise StudySpecError(f"{path}: corrupt or truncated JSON ({err})") from None
    except (TypeError, AttributeError) as err:
        raise StudySpecError(f"{path}: not a study spec ({err})") from None


def cell_name(overrides: dict[str, Any]) -> str:
    """``objective-neu__seed-0``: readable, one folder name per cell."""
    return "__".join(re.sub(r"[^A-Za-z0-9._-]", "_", f"{k}-{v}") for k, v in overrides.items())


def condition_label(condition: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in condition.items()) or "all cells"


def _coerce(overrides: dict[str, Any]) -> dict[str, Any]:
    """TOML writes ``3`` for a float field that means ``3.0``."""
    floats = {
        f.name
        for cls in (TrainConfig, TaskDistribution, *MODEL_CONFIGS.values())
        for f in fields(cls)
        if isinstance(f.default, float)
    }
    return {
        k: float(v) if k in floats and isinstance(v, int) and not isinstance(v, bool) else v
        for k, v in overrides.items()
    }
