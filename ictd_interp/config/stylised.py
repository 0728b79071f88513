"""The stylised model's configuration: one validated dataclass with TransformerLens-compatible derived fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ictd_interp.config.fields import (
    ATTENTIONS,
    BACKWARDS,
    FORMS,
    MASKS,
    ModelConfigIO,
    check_bool,
    check_choice,
    check_gamma,
    check_positive_int,
    dtype_name,
    from_dict_strict,
)


@dataclass
class ICTDConfig(ModelConfigIO):
    """Architecture of an ICTD transformer (docs/theory.md §4).

    Args:
        d_features: feature dimension ``d``; the residual stream has ``d + 3`` rows.
        n_layers: depth ``L``: one layer is one TD iteration under theta*.
        gamma: discount used by the temporal shift (TSM form) and by theta*.
        form: ``"tsm"`` (one head + parameter-free temporal shift) or ``"dual"`` (two heads,
            the second one's output shifted to the predecessor column).
        attention: ``"softmax"`` (this paper) or ``"linear"`` (the stylised model with its softmax replaced by
            ``(1/n)`` times the raw scores: the linear-attention ablation; the predecessor's own model is
            ``LinearICTDConfig``).
        tied: share one layer's ``A`` and ``V`` across depth.
        mask: ``"paper"`` frees ``A``'s feature block and ``V``'s value rows only; ``"full"`` frees all.
        init_scale: standard deviation of the random initial weights on free entries.
        dtype: ``"float32"`` or ``"float64"`` (a torch dtype is taken and stored by name).
        seed: seed of the random initial weights.
        backward: how training differentiates the paper-mask fast path: ``"fused"`` (a hand-written
            backward, ``models/stylised/fused_backward.py``; the faster: docs/performance.md) or ``"autograd"``
            (op by op: the numerics of every model shipped before the option existed). Equal up to float rounding;
            a config saved without this field ran ``"autograd"`` and loads as such.
    """

    d_features: int
    n_layers: int = 3
    gamma: float = 0.9
    form: str = "tsm"
    attention: str = "softmax"
    tied: bool = False
    mask: str = "paper"
    init_scale: float = 0.01
    dtype: Any = "float32"  # a name, or a torch dtype (stored by its name)
    seed: int = 0
    backward: str = "fused"

    def __post_init__(self) -> None:
        check_positive_int(self, "d_features", "n_layers")
        self.gamma = check_gamma(self.gamma)
        check_choice("form", self.form, FORMS)
        check_choice("attention", self.attention, ATTENTIONS)
        check_choice("mask", self.mask, MASKS)
        check_choice("backward", self.backward, BACKWARDS)
        self.dtype = dtype_name(self.dtype)
        check_bool(self, "tied")
        if not self.init_scale >= 0:
            raise ValueError(f"init_scale: must be >= 0, got {self.init_scale!r}")
        self.device = "cpu"  # not a field (not saved): the model keeps it in sync with its weights

    architecture = "stylised"  # not a field: which model class a config builds (the registry's key)
    description = "the paper's model: the residual stream is the prompt, theta* a point of it"
    quick_preset = "quick"  # this architecture's own minutes-on-2-cores preset
    model_module = "ictd_interp.models.stylised.model"  # where its model class (``original_architecture``) lives
    holds_theta_star = True  # θ* is a point of its weights: readings against θ*'s weights and value row apply
    # TransformerLens-compatible fields its utilities read (HookedTransformerConfig names).
    n_key_value_heads = None  # no grouped-query attention
    positional_embedding_type = "none"  # position enters only through the shift, no embedding
    use_attn_result = True  # hook_result is always computed
    default_prepend_bos = False
    d_vocab = None  # continuous prompts, no vocabulary
    act_fn = None
    original_architecture = "HookedICTDTransformer"

    # TransformerLens-compatible derived fields.
    @property
    def d_model(self) -> int:
        return self.d_features + 3

    @property
    def n_heads(self) -> int:
        return 1 if self.form == "tsm" else 2

    @property
    def d_head(self) -> int:
        return self.d_model

    @property
    def attn_only(self) -> bool:
        """The TSM form's shift is exposed as the block's second sublayer (``hook_mlp_out``)."""
        return self.form == "dual"

    @property
    def d_mlp(self) -> int | None:
        return None if self.form == "dual" else 1

    @property
    def normalization_type(self) -> None:
        return None

    @property
    def n_ctx(self) -> None:
        return None  # any context length

    def theta_star_config(self) -> "ICTDConfig":
        """The architecture θ* is built in to compare with this model: its own."""
        return self

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ICTDConfig":
        """Inverse of ``to_dict``; derived fields (``d_model``, ``n_heads``, ...) may be present if
        they agree with the ones the config derives."""
        derived = {k: data[k] for k in DERIVED if k in data}
        data = {"backward": "autograd", **data}  # saved before the field existed: trained with autograd
        cfg = from_dict_strict(cls, {k: v for k, v in data.items() if k not in DERIVED})
        for key, value in derived.items():
            if getattr(cfg, key) != value:
                raise ValueError(f"{key}: {value!r} contradicts the config, which derives {getattr(cfg, key)!r}")
        return cfg


def softmax_theta_star(cfg: Any) -> ICTDConfig:
    """θ*'s yardstick for a model of another architecture: the TSM softmax stylised model of the same depth, ties,
    discount and dtype."""
    return ICTDConfig(d_features=cfg.d_features, n_layers=cfg.n_layers, gamma=cfg.gamma, tied=cfg.tied, dtype=cfg.dtype)


DERIVED = ("d_model", "n_heads", "d_head", "attn_only", "normalization_type", "d_mlp")
