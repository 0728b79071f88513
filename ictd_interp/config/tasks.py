"""The task distribution: which MRPs, how many states, which features, how long a context, which γ.

One validated object (torch-free, so configs and ``--help`` stay light) used by training, evaluation,
every analysis and ``ictd-interp evaluate``; ``ictd_interp.tasks.sampling.sample_from`` draws a ``TaskBatch`` from it
(docs/theory.md §1, §6). Families: every registered one (``ictd_interp.config.registry.FAMILIES``: a fresh MRP
per task) and ``gym:ENV_ID`` (the MRP a uniform policy induces on a Gymnasium toy-text environment, e.g.
``gym:FrozenLake-v1``; one MRP, fresh features).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ictd_interp.config.fields import (
    CONTROL_ACTIONS,
    FEATURE_KINDS,
    TERMINALS,
    check_choice,
    check_gamma,
    check_onehot,
    check_positive_int,
    did_you_mean,
    from_dict_strict,
)
from ictd_interp.config.registry import FAMILIES


@dataclass(frozen=True)
class TaskDistribution:
    """Args:
    family: <families>, or gym:ENV_ID (e.g. gym:FrozenLake-v1).
    n_states: states per MRP (a Gymnasium environment sets its own).
    d_features: feature dimension d.
    context_len: n, transitions in each prompt.
    gamma: discount.
    feature_kind: uniform (scale * U(-1, 1) per entry) or onehot (needs d_features >= states).
    feature_scale: multiplies the features; θ*'s softmax kernel has inverse temperature scale².
    terminal: Gymnasium terminal transitions: restart (ergodic) or absorbing (episodic).
    """

    family: str = "boyan"
    n_states: int = 10
    d_features: int = 4
    context_len: int = 30
    gamma: float = 0.9
    feature_kind: str = "uniform"
    feature_scale: float = 1.0
    terminal: str = "restart"

    def __post_init__(self) -> None:
        check_family(self.family)
        check_choice("feature_kind", self.feature_kind, FEATURE_KINDS)
        check_choice("terminal", self.terminal, TERMINALS)
        check_positive_int(self, "n_states", "d_features", "context_len")
        least = 1 if self.family.startswith("gym:") else FAMILIES[self.family].min_states
        if self.n_states < least:
            raise ValueError(f"n_states: the {self.family} family needs at least {least} states, got {self.n_states}")
        object.__setattr__(self, "gamma", check_gamma(self.gamma))
        if not self.feature_scale > 0:
            raise ValueError(f"feature_scale: must be > 0, got {self.feature_scale!r}")
        if not self.family.startswith("gym:"):
            self.check_onehot(self.n_states * (self.n_actions or 1))

    @property
    def n_actions(self):
        """``CONTROL_ACTIONS`` for a control family (its "states" are state-action pairs), else None."""
        return CONTROL_ACTIONS if self.family in FAMILIES and FAMILIES[self.family].control else None

    @property
    def split_draws(self) -> bool:
        """Whether the family draws its tasks as uniforms first (``ictd_interp.tasks.sampling.draw_tasks``): its
        registry entry says (a Gymnasium environment's tasks are drawn whole)."""
        return not self.family.startswith("gym:") and FAMILIES[self.family].split_draws

    def check_onehot(self, n_states: int) -> None:
        """The one place that checks one-hot features fit: ``d_features >= n_states``."""
        if self.feature_kind == "onehot":
            check_onehot(
                self.d_features,
                n_states,
                where=f" states of {self.family}",
                advice="; use uniform features, more feature dimensions, or (ictd-interp evaluate) your "
                "own matrix with --features FILE.npy",
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TaskDistribution":
        return from_dict_strict(cls, data)


def check_family(family: str) -> None:
    """A registered family or a Gymnasium environment (``gym:ENV_ID``), else a ``ValueError`` naming ``family``."""
    if family not in FAMILIES and not family.startswith("gym:"):
        raise ValueError(
            f"family: must be one of {tuple(FAMILIES)} or gym:ENV_ID (e.g. gym:FrozenLake-v1), got {family!r}"
            + did_you_mean(family, FAMILIES)
        )
