"""Every choice a config field accepts and every check configs share, each written once (torch-free)."""

from __future__ import annotations

import difflib
from dataclasses import asdict, fields
from typing import Any

FORMS = ("tsm", "dual")
ATTENTIONS = ("softmax", "linear")
BACKWARDS = ("fused", "autograd")  # how the stylised fast path is differentiated (ICTDConfig.backward)
MASKS = ("paper", "full")
DTYPES = ("float32", "float64")
FEATURE_KINDS = ("uniform", "onehot")
TERMINALS = ("restart", "absorbing")
CONTROL_ACTIONS = 2  # actions of every state of the control families (registry.FAMILIES' control entries)
OPTIMIZERS = ("adam", "adamw", "sgd")
OPTIMIZER_KERNELS = ("fused", "foreach")  # how the optimiser update runs (TrainConfig.optimizer_kernel)
DEVICES = ("cpu", "cuda")
FORWARDS = ("positional", "state-space")  # how training runs the model (TrainConfig.forward)
SAMPLERS = ("host", "device")  # where the training batches are drawn (TrainConfig.sampler)
LR_SCHEDULES = ("constant", "cosine")
ACT_FNS = ("gelu", "relu")
LINEAR_ACTIVATIONS = ("identity", "relu")  # on the linear model's scores; both act on each entry alone


class ModelConfigIO:
    """What every model config shares: ``to_dict``, a strict ``from_dict`` (unknown keys named),
    ``torch_dtype`` (the dtype field is a name, so configs stay torch-free until asked), and the defaults of its
    architecture's record (``ictd_interp.config.train.MODEL_CONFIGS``) that a config class overrides where it
    differs: ``architecture``, ``description``, ``model_module`` and ``original_architecture`` (its model class),
    ``quick_preset``, ``holds_theta_star``, and the two checks below."""

    architecture: str  # the registry's key (not a field)
    description: str
    model_module: str  # the module of its model class, imported on first use (configs stay torch-free)
    original_architecture: str  # its model class's name (TransformerLens's field of that name)
    quick_preset = None  # its own minutes-on-2-cores preset, if any
    holds_theta_star = False  # θ* is a point of its weights (readings against θ*'s weights apply)

    def check_positions(self, positions: int) -> None:
        """Raise if the model cannot read prompts of ``positions`` positions (default: any length)."""

    @staticmethod
    def migrate_flat(data: dict[str, Any]) -> dict[str, Any]:
        """A flat ``TrainConfig`` dict written before the nesting, in this architecture's current names."""
        return data

    @property
    def torch_dtype(self):
        import torch

        return getattr(torch, self.dtype)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        return from_dict_strict(cls, data)


def from_dict_strict(cls: type, data: dict[str, Any]):
    """Build a dataclass from a dict, naming unknown keys instead of ignoring them."""
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown field(s) {unknown}; known fields are {sorted(names)}")
    return cls(**data)


def dtype_name(value: Any) -> str:
    """``"float64"`` from ``"float64"`` or ``torch.float64`` (the configs store the name, torch-free)."""
    name = str(value).removeprefix("torch.")
    check_choice("dtype", name, DTYPES)
    return name


def check_choice(name: str, value: Any, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name}: must be one of {tuple(choices)}, got {value!r}{did_you_mean(value, choices)}")


def did_you_mean(value: Any, choices) -> str:
    """``; did you mean 'loop'?`` for a mistyped string with a close choice (difflib), else empty."""
    if not isinstance(value, str):
        return ""
    near = difflib.get_close_matches(value, [str(c) for c in choices], n=1)
    return f"; did you mean {near[0]!r}?" if near else ""


def check_gamma(gamma: Any, name: str = "gamma") -> float:
    """The discount's range, [0, 1) (the one place it is checked); returns it as a float."""
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0.0 <= gamma < 1.0:
        raise ValueError(f"{name}: must be in [0, 1), got {gamma!r}")
    return float(gamma)


def check_positive_int(obj: Any, *names: str, least: int = 1) -> None:
    """Each named field of ``obj`` is an integer >= ``least`` (a bool is not an integer here)."""
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"{name}: must be an integer >= {least}, got {value!r}")


def check_onehot(d: int, n_states: int, name: str = "d_features", where: str = "", advice: str = "") -> None:
    """One-hot features put state ``s`` on axis ``s``: they need ``d >= n_states`` (the one place checked)."""
    if d < n_states:
        raise ValueError(f"{name}: one-hot features need {name} >= n_states ({d} < {n_states}{where}){advice}")


def check_bool(obj: Any, *names: str) -> None:
    for name in names:
        if not isinstance(getattr(obj, name), bool):
            raise ValueError(f"{name}: must be a bool, got {getattr(obj, name)!r}")
