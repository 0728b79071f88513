"""The settings of ``ictd-interp construct`` and ``ictd-interp evaluate``: validated dataclasses whose
fields become the commands' flags (``ictd_interp.cli.args``); task settings are a ``TaskDistribution``'s."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from ictd_interp.config import ICTDConfig, TaskDistribution
from ictd_interp.config.fields import FORMS, check_choice, check_positive_int


@dataclass
class ConstructConfig:
    """theta* on randomized Boyan chains: error versus depth.

    Args:
        tasks: the tasks (one-hot features scaled by 3 make the kernel nearly diagonal).
        max_depth: deepest model; depths 1, 2, 4, ... up to it are reported.
        form: tsm or dual.
        n_tasks: tasks averaged over.
        seed: seeds the tasks.
    """

    tasks: TaskDistribution = field(
        default_factory=lambda: TaskDistribution(
            d_features=10, feature_kind="onehot", feature_scale=3.0, context_len=200
        )
    )
    max_depth: int = 64
    form: str = "tsm"
    n_tasks: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        check_positive_int(self, "max_depth", "n_tasks")
        check_choice("form", self.form, FORMS)

    @property
    def model(self) -> ICTDConfig:
        return ICTDConfig(
            d_features=self.tasks.d_features,
            n_layers=self.max_depth,
            gamma=self.tasks.gamma,
            form=self.form,
            dtype="float64",
        )


@dataclass
class EvaluateConfig:
    """Out-of-distribution evaluation of a checkpoint (and theta*) on another MRP source.

    Args:
        env: <families>, or gym:ENV_ID (e.g. gym:FrozenLake-v1).
        tasks: the task settings, a TaskDistribution's own flags: its family is env, its d_features the
            model's (``for_model``), so neither is a flag here.
        n_tasks: tasks (fresh MRPs for families; one MRP, fresh features, for Gymnasium); the default is the verdict
            ladder's sample, one its rules can decide (fewer may leave the verdict undecided).
        features: optional .npy file with a [n_states, d] feature matrix.
        depth: theta*'s deepest layer for the error-versus-depth curve.
        seed: seeds MRPs, features and trajectories.
    """

    env: str = "boyan"
    tasks: TaskDistribution = field(default_factory=lambda: TaskDistribution(context_len=200))
    n_tasks: int = 256  # the verdict ladder's LADDER_TASKS
    features: str = ""
    depth: int = 32
    seed: int = 0

    not_flags = ("family", "d_features")  # the tasks' settings evaluate takes from env and the model
    model_defaults = ("context_len", "gamma")  # default to the model's own training tasks (``for_model``)

    def __post_init__(self) -> None:
        check_positive_int(self, "n_tasks", least=2)
        check_positive_int(self.tasks, "n_states", least=2)
        check_positive_int(self, "depth")
        self.tasks = _env_tasks(self.env, self.tasks)

    @classmethod
    def for_model(
        cls, d_features: int, env: Optional[str] = None, context_len: int = 200, gamma: float = 0.9
    ) -> "EvaluateConfig":
        """The defaults for a model with ``d_features`` feature dimensions, trained at ``context_len`` and ``gamma``,
        on ``env`` (the default's when None): the flags then apply to tasks of the right family, d, n and γ, each
        check run once on what will be drawn."""
        tasks = TaskDistribution(context_len=context_len, d_features=d_features, gamma=gamma)
        return cls(env=env or cls.env, tasks=tasks)

    def flat(self) -> dict:
        """Every setting by its flag's name, in the flags' order (what an output folder's request holds)."""
        t = self.tasks
        return {
            "env": self.env,
            "n_tasks": self.n_tasks,
            "n_states": t.n_states,
            "gamma": t.gamma,
            "context_len": t.context_len,
            "feature_kind": t.feature_kind,
            "feature_scale": t.feature_scale,
            "features": self.features,
            "terminal": t.terminal,
            "depth": self.depth,
            "seed": self.seed,
        }

    def settings(self) -> dict:
        """What applies, once: a Gymnasium environment sets its own state count; terminals apply to it only;
        features only when given."""
        gym = self.env.startswith("gym:")
        return {
            k: v
            for k, v in self.flat().items()
            if not (gym and k == "n_states") and not (not gym and k == "terminal") and not (k == "features" and not v)
        }


def _env_tasks(env: str, tasks: TaskDistribution) -> TaskDistribution:
    """``tasks`` of family ``env``; an error about the family names env, the flag the user typed."""
    try:
        return replace(tasks, family=env)
    except ValueError as err:
        head, sep, rest = str(err).partition(": ")
        raise ValueError(f"env: {rest}" if sep and head == "family" else str(err)) from None


__all__ = ["ConstructConfig", "EvaluateConfig"]
