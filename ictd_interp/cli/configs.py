"""The settings of ``ictd-interp construct`` and ``ictd-interp evaluate``: validated dataclasses whose
fields become the commands' flags (``ictd_interp.cli.args``); task settings are a ``TaskDistribution``'s."""

from __future__ import annotations

from dataclasses import dataclass, field

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
    """Out-of-distribution evaluation of a checkpoint (and theta*) on another MRP source. The task
    settings are a TaskDistribution's (validated by it) whose d_features is the model's.

    Args:
        env: <families>, or gym:ENV_ID (e.g. gym:FrozenLake-v1).
        n_tasks: tasks (fresh MRPs for families; one MRP, fresh features, for Gymnasium).
        n_states: states of the MRP families (Gymnasium sets its own).
        gamma: discount (the model's own temporal shift uses the gamma it was built with).
        context_len: n; prefixes of it give the error versus context length.
        feature_kind: uniform or onehot (needs n_states <= the model's d).
        feature_scale: feature scale (θ*'s softmax kernel has inverse temperature scale²).
        features: optional .npy file with a [n_states, d] feature matrix.
        terminal: Gymnasium terminal handling, restart (ergodic) or absorbing.
        depth: theta*'s deepest layer for the error-versus-depth curve.
        seed: seeds MRPs, features and trajectories.
    """

    env: str = "boyan"
    n_tasks: int = 64
    n_states: int = 10
    gamma: float = 0.9
    context_len: int = 200
    feature_kind: str = "uniform"
    feature_scale: float = 1.0
    features: str = ""
    terminal: str = "restart"
    depth: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        check_positive_int(self, "n_tasks", "n_states", least=2)
        check_positive_int(self, "depth")
        self.tasks(d_features=self.n_states)  # the task settings' own checks (one-hot is checked with the model)

    def tasks(self, d_features: int) -> TaskDistribution:
        """The task distribution for a model with ``d_features`` feature dimensions (its ``family`` is
        this config's ``env``, and an error about it says ``env``, the flag the user typed)."""
        try:
            return TaskDistribution(
                family=self.env,
                n_states=self.n_states,
                d_features=d_features,
                context_len=self.context_len,
                gamma=self.gamma,
                feature_kind=self.feature_kind,
                feature_scale=self.feature_scale,
                terminal=self.terminal,
            )
        except ValueError as err:
            head, sep, rest = str(err).partition(": ")
            raise ValueError(f"env: {rest}" if sep and head == "family" else str(err)) from None

    def settings(self) -> dict:
        """What applies, once: a Gymnasium environment sets its own state count; terminals apply to it only."""
        gym = self.env.startswith("gym:")
        return {
            k: v
            for k, v in vars(self).items()
            if not (gym and k == "n_states") and not (not gym and k == "terminal") and not (k == "features" and not v)
        }


__all__ = ["ConstructConfig", "EvaluateConfig"]
