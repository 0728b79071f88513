"""Configuration of the earlier linear in-context TD transformer (Wang et al., ICLR 2025; docs/theory.md §13):
torch-free."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ictd_interp.config.fields import (
    LINEAR_ACTIVATIONS,
    ModelConfigIO,
    check_bool,
    check_choice,
    check_gamma,
    check_positive_int,
    dtype_name,
)
from ictd_interp.config.stylised import ICTDConfig, softmax_theta_star


@dataclass
class LinearICTDConfig(ModelConfigIO):
    """The predecessor's model: prompt ``Z`` of ``2d + 1`` rows, layer ``Z <- Z + (1/n) P Z M act(Z^T Q Z)``,
    prediction ``-Z[-1, -1]`` (docs/theory.md §13).

    Args:
        d_features: feature dimension ``d``; the residual stream has ``2d + 1`` rows.
        n_layers: depth ``L``: one layer is one batch TD update under the TD(0) construction.
        gamma: discount written into the prompt's middle block (``gamma phi(S_{k+1})``).
        tied: one layer's ``P`` and ``Q`` shared across depth (the predecessor's "auto" mode; False: "sequential").
        activation: on the scores ``Z^T Q Z``: identity (linear attention, the predecessor's theory) or relu.
        trace_decay: ``lambda`` of the source mixing ``M`` (0: ``M = diag(1, ..., 1, 0)``; > 0: ``M``'s lower
            triangle ``lambda^(i-j)``, the TD(lambda) construction's eligibility traces).
        init_gain: gain of the Xavier-normal initial ``P`` and ``Q`` (divided by ``n_layers`` per layer when untied,
            as the predecessor's code).
        dtype: float32 or float64.
        seed: seed of the initial weights.
    """

    d_features: int
    n_layers: int = 3
    gamma: float = 0.9
    tied: bool = True
    activation: str = "identity"
    trace_decay: float = 0.0
    init_gain: float = 0.1
    dtype: Any = "float32"  # a name, or a torch dtype (stored by its name)
    seed: int = 0

    architecture = "linear-ictd"  # not a field: which model class a config builds (the registry's key)
    description = "the predecessor's linear model (docs/theory.md §13)"
    quick_preset = None  # none of its own: the stylised quick preset with --architecture linear-ictd
    model_module = "ictd_interp.models.linear.model"  # where its model class (``original_architecture``) lives
    holds_theta_star = False  # its weights hold the TD(0) construction, not θ*
    # TransformerLens-compatible fields its utilities read (HookedTransformerConfig names).
    n_heads = 1
    n_key_value_heads = None
    positional_embedding_type = "none"
    use_attn_result = True
    default_prepend_bos = False
    d_vocab = None
    act_fn = None
    attn_only = True
    d_mlp = None
    normalization_type = None
    n_ctx = None
    original_architecture = "HookedLinearICTD"

    def __post_init__(self) -> None:
        check_positive_int(self, "d_features", "n_layers")
        self.gamma = check_gamma(self.gamma)
        check_choice("activation", self.activation, LINEAR_ACTIVATIONS)
        check_bool(self, "tied")
        if not 0 <= self.trace_decay <= 1:
            raise ValueError(f"trace_decay: lambda must lie in [0, 1], got {self.trace_decay!r}")
        if not self.init_gain >= 0:
            raise ValueError(f"init_gain: must be >= 0, got {self.init_gain!r}")
        self.dtype = dtype_name(self.dtype)
        self.device = "cpu"  # not a field: the model keeps it in sync with its weights

    @property
    def d_model(self) -> int:
        return 2 * self.d_features + 1

    @property
    def d_head(self) -> int:
        return self.d_model

    def theta_star_config(self) -> ICTDConfig:
        """This project's yardstick beside the model's own TD(0) construction (``softmax_theta_star``)."""
        return softmax_theta_star(self)
