"""Configuration of the standard-architecture ICTD transformer (docs/theory.md §10): torch-free."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ictd_interp.config.fields import (
    ACT_FNS,
    ModelConfigIO,
    check_bool,
    check_choice,
    check_gamma,
    check_positive_int,
    dtype_name,
)
from ictd_interp.config.stylised import ICTDConfig, softmax_theta_star
from ictd_interp.config.tasks import TaskDistribution


@dataclass
class StandardConfig(ModelConfigIO):
    """A pre-LN transformer on ICTD prompts, with HookedTransformer's hook names (docs/theory.md §10).

    Args:
        d_features: feature dimension ``d`` of the prompts it reads (``d + 3`` prompt rows).
        d_model: residual stream width.
        n_heads: attention heads per layer.
        d_head: width of each head (``d_model // n_heads`` when 0).
        n_layers: blocks.
        d_mlp: hidden width of each MLP; 0: attention-only blocks.
        act_fn: MLP non-linearity (gelu or relu).
        layer_norm: pre-LN blocks and a final LayerNorm (False: none).
        pos_embed: learned positional embeddings (then prompts hold at most ``n_ctx`` positions).
        n_ctx: positions the positional embedding covers.
        gamma: discount of the tasks it is trained on (the model does not use it; objectives do).
        tied: one block's weights shared by every layer (then the block can be run to any depth).
        init_range: standard deviation of the initial weights (LayerNorm weights start at 1).
        dtype: float32 or float64.
        seed: seed of the initial weights.
    """

    d_features: int
    d_model: int = 32
    n_heads: int = 2
    d_head: int = 0
    n_layers: int = 3
    d_mlp: int = 64
    act_fn: str = "gelu"
    layer_norm: bool = True
    pos_embed: bool = False
    n_ctx: int = 128
    gamma: float = 0.9
    tied: bool = False
    init_range: float = 0.1
    dtype: Any = "float32"  # a name, or a torch dtype (stored by its name)
    seed: int = 0

    architecture = "standard"  # not a field: which model class a config builds (the registry's key)
    description = "a pre-LN transformer with MLPs, nothing pinned (docs/theory.md §10)"
    quick_preset = "standard-quick"  # this architecture's own minutes-on-2-cores preset
    model_module = "ictd_interp.models.standard.model"  # where its model class (``original_architecture``) lives
    holds_theta_star = False  # θ*'s circuit fits in a block, but no weight of it is θ*'s (function-space analyses)
    # TransformerLens-compatible fields its utilities read (HookedTransformerConfig names).
    n_key_value_heads = None
    use_attn_result = True
    default_prepend_bos = False
    d_vocab = None
    original_architecture = "HookedStandardTransformer"

    def check_positions(self, positions: int) -> None:
        if self.pos_embed and self.n_ctx < positions:
            raise ValueError(
                f"n_ctx: the positional embedding covers {self.n_ctx} positions but the prompts "
                f"hold {positions} (context_len + 1); set --n-ctx {positions} or more"
            )

    @staticmethod
    def migrate_flat(data: dict[str, Any]) -> dict[str, Any]:
        """Its ``init_scale`` was its ``init_range``; its ``n_ctx`` was ``context_len + 1``."""
        data = dict(data)
        data["init_range"] = data.pop("init_scale", 0.1)
        data["n_ctx"] = data.get("context_len", TaskDistribution.context_len) + 1
        return data

    def __post_init__(self) -> None:
        check_positive_int(self, "d_features", "d_model", "n_heads", "n_layers", "n_ctx")
        check_positive_int(self, "d_head", "d_mlp", least=0)
        if self.d_head == 0:
            if self.d_model % self.n_heads:
                raise ValueError(
                    f"d_head: d_model={self.d_model} is not divisible by n_heads={self.n_heads}; set d_head explicitly"
                )
            self.d_head = self.d_model // self.n_heads
        self.gamma = check_gamma(self.gamma)
        check_choice("act_fn", self.act_fn, ACT_FNS)
        self.dtype = dtype_name(self.dtype)
        check_bool(self, "layer_norm", "pos_embed", "tied")
        if not self.init_range >= 0:
            raise ValueError(f"init_range: must be >= 0, got {self.init_range!r}")
        self.device = "cpu"  # not a field: the model keeps it in sync with its weights

    @property
    def d_prompt(self) -> int:
        return self.d_features + 3

    @property
    def attn_only(self) -> bool:
        return self.d_mlp == 0

    @property
    def normalization_type(self):
        return "LN" if self.layer_norm else None

    @property
    def positional_embedding_type(self) -> str:
        return "standard" if self.pos_embed else "none"

    def theta_star_config(self) -> ICTDConfig:
        """θ*'s yardstick for this model (``softmax_theta_star``)."""
        return softmax_theta_star(self)
