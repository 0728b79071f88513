"""The named plug-ins a config chooses from: MRP families and pretraining objectives. What is registered here
is the list: config validation, the CLI's help (``<families>`` and ``<objectives>`` in a docstring's ``Args:``),
the task sampler, the trainer and the docs' tables (checked by the tests) all read it. An entry names the
function behind it as ``module:function``, imported on first use, so configs stay torch-free. The methods of
the methods benchmark have their own registry (``ictd_interp.analyses.methods_benchmark.methods.METHODS``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import Any, Optional, Union


@dataclass(frozen=True)
class Family:
    """An MRP family; ``make(dist, n_tasks, generator)`` returns its MRPs, or for a ``control`` family the
    two-action MDPs whose state-action chain under the uniform behaviour policy is the MRP. ``split_draws``: its
    tasks are drawn as uniforms first and built after (``ictd_interp.tasks.sampling.draw_tasks``, which draws and
    builds Boyan chains: their maker alone may set it), so a run builds several batches in one pass and may draw
    on the device; every other option (a finite task pool, shuffled rewards) works on every family.
    ``min_states``: the fewest states it is defined on."""

    name: str
    help: str
    make: str
    control: bool = False
    split_draws: bool = False
    min_states: int = 1

    def __post_init__(self) -> None:
        if self.split_draws and self.make != SPLIT_DRAWS_MAKER:
            raise ValueError(
                f"family {self.name!r}: split_draws builds Boyan chains from their uniforms ({SPLIT_DRAWS_MAKER}); "
                f"a family made by {self.make} draws whole tasks (leave split_draws out)"
            )


@dataclass(frozen=True)
class Objective:
    """A pretraining objective: its loss (``loss``, a ``module:function`` name; calling the entry calls it,
    ``objective(model, batch, depth=None)``) and what its batches need (Monte-Carlo returns, true values ``v_pi`` or
    ``q_star``, each action's query); ``control``: it learns action values."""

    name: str
    help: str
    loss: str
    needs_returns: bool = False
    needs_values: bool = False
    values: str = "v_pi"
    needs_action_queries: bool = False
    control: bool = False

    @property
    def loss_fn(self) -> Callable[..., Any]:
        """The loss function ``loss`` names, looked up at each use (configs stay torch-free, and a function replaced
        in its module, a test's monkeypatch, is the one called)."""
        return load(self.loss)

    def __call__(self, model: Any, batch: Any, depth: Optional[int] = None) -> Any:
        return self.loss_fn(model, batch, depth=depth)

    def mc_horizon(self, config: Any) -> int:
        """Transitions the trajectories are extended by for the Monte-Carlo returns (0 without returns)."""
        return config.mc_horizon if self.needs_returns else 0


SPLIT_DRAWS_MAKER = "ictd_interp.tasks.families:boyan"  # the one maker whose draws are split (draw_tasks)
FAMILIES: dict[str, Family] = {}
OBJECTIVES: dict[str, Objective] = {}


def register(entry: Union[Family, Objective]) -> None:
    table = FAMILIES if isinstance(entry, Family) else OBJECTIVES
    if entry.name in table:
        raise ValueError(f"{entry.name!r}: already registered")
    table[entry.name] = entry


def load(reference: str) -> Callable[..., Any]:
    """The function a ``module:function`` reference names."""
    module, name = reference.split(":")
    return getattr(import_module(module), name)


def listing(table: dict[str, Union[Family, Objective]]) -> str:
    """``name (help), ...``: what a help text shows."""
    return ", ".join(f"{entry.name} ({entry.help})" for entry in table.values())


def markdown(table: dict[str, Union[Family, Objective]]) -> list[str]:
    """The rows of docs/guide.md's table of ``table`` (the tests hold the guide to them)."""
    return ["| name | what it is |", "|---|---|", *(f"| `{e.name}` | {e.help} |" for e in table.values())]


_TASKS, _LOSSES = "ictd_interp.tasks.families", "ictd_interp.training.objectives"
for _entry in (
    Family("boyan", "the paper's randomized Boyan chains", f"{_TASKS}:boyan", split_draws=True, min_states=2),
    Family("loop", "the predecessor's ring with random extra edges", f"{_TASKS}:loop"),
    Family("random", "dense random ergodic chains", f"{_TASKS}:dense_random"),
    Family("random-sparse", "random ergodic chains, 20% of edges", f"{_TASKS}:sparse_random"),
    Family(
        "mixture", "each task from boyan, loop, random or random-sparse, uniformly", f"{_TASKS}:mixture", min_states=2
    ),
    Family("mdp-random", "random two-action MDPs, as their state-action chain", f"{_TASKS}:random_mdp", True),
    Family("mdp-chain", "two-action chains, as their state-action chain", f"{_TASKS}:chain_mdp", True),
    Objective("td", "semi-gradient TD; SARSA on a control family", f"{_LOSSES}:td_loss"),
    Objective("neu", "the norm of the expected TD update", f"{_LOSSES}:neu_loss"),
    Objective("mc", "regression on the Monte-Carlo return", f"{_LOSSES}:mc_loss", needs_returns=True),
    Objective(
        "supervised",
        "regression on the true v_pi; q_pi on a control family",
        f"{_LOSSES}:supervised_loss",
        needs_values=True,
    ),
    Objective(
        "q-learning",
        "semi-gradient, bootstrapping on max_a q(S', a); control families only",
        f"{_LOSSES}:q_learning_loss",
        needs_action_queries=True,
        control=True,
    ),
    Objective(
        "supervised-q-star",
        "regression on the true q*; control families only",
        f"{_LOSSES}:supervised_loss",
        needs_values=True,
        values="q_star",
        control=True,
    ),
):
    register(_entry)
