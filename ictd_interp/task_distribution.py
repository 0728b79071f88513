"""The task distribution: which MRPs, how many states, which features, how long a context, which γ.

One validated object (torch-free, so configs and ``--help`` stay light) used by training, evaluation,
every analysis and ``ictd-interp evaluate``; ``sample`` draws a ``TaskBatch`` from it
(docs/theory.md §1, §6). Families: ``boyan`` (the paper's randomized Boyan chains), ``loop``,
``random``, ``random-sparse`` (a fresh MRP per task) and ``gym:ENV_ID`` (the MRP a uniform policy
induces on a Gymnasium toy-text environment, e.g. ``gym:FrozenLake-v1``; one MRP, fresh features).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Optional

from ictd_interp.config import FEATURE_KINDS, check_choice

FAMILIES = ("boyan", "loop", "random", "random-sparse")
TERMINALS = ("restart", "absorbing")


@dataclass(frozen=True)
class TaskDistribution:
    """Args:
        family: boyan, loop, random, random-sparse or gym:ENV_ID.
        n_states: states per MRP (a Gymnasium environment sets its own).
        d_features: feature dimension d.
        context_len: n, transitions in each prompt.
        gamma: discount.
        feature_kind: uniform (scale * U(-1, 1) per entry) or onehot (needs d_features >= states).
        feature_scale: the softmax kernel's inverse temperature.
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
        if self.family not in FAMILIES and not self.family.startswith("gym:"):
            raise ValueError(f"family: must be one of {FAMILIES} or gym:ENV_ID (e.g. gym:FrozenLake-v1), "
                             f"got {self.family!r}")
        check_choice("feature_kind", self.feature_kind, FEATURE_KINDS)
        check_choice("terminal", self.terminal, TERMINALS)
        for name in ("n_states", "d_features", "context_len"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name}: must be a positive integer, got {getattr(self, name)!r}")
        if self.family == "boyan" and self.n_states < 2:
            raise ValueError(f"n_states: a Boyan chain needs at least 2 states, got {self.n_states}")
        if not 0.0 <= self.gamma < 1.0:
            raise ValueError(f"gamma: must be in [0, 1), got {self.gamma!r}")
        if not self.family.startswith("gym:"):
            self.check_onehot(self.n_states)

    def check_onehot(self, n_states: int) -> None:
        """The one place that checks one-hot features fit: ``d_features >= n_states``."""
        if self.feature_kind == "onehot" and self.d_features < n_states:
            raise ValueError(f"d_features: one-hot features need d_features >= n_states ({self.d_features} < "
                             f"{n_states} states of {self.family}); use uniform features, more feature dimensions, "
                             "or (ictd-interp evaluate) your own matrix with --features FILE.npy")

    def sample(self, n_tasks: int, *, seed: Optional[int] = None, generator=None, length: Optional[int] = None,
               features=None):
        """``n_tasks`` tasks with one trajectory of ``length`` transitions each (default ``context_len``);
        ``features`` (``[n_states, d]``) replaces the random features."""
        from ictd_interp.tasks import sample_from

        return sample_from(self, n_tasks, seed=seed, generator=generator, length=length, features=features)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
