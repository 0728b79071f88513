"""Which entries of ``A`` and ``V`` are trainable (docs/theory.md §4, "training masks")."""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.config.stylised import ICTDConfig
from ictd_interp.tasks.prompt import PromptLayout


def attention_mask(cfg: ICTDConfig) -> Float[Tensor, "head d_model d_model"]:
    """Paper mask: scores may read features only, so ``A`` is free in its ``d x d`` feature block."""
    m = torch.ones(cfg.n_heads, cfg.d_model, cfg.d_model, dtype=cfg.torch_dtype)
    if cfg.mask == "paper":
        m.zero_()
        m[:, : cfg.d_features, : cfg.d_features] = 1.0
    return m


def value_mask(cfg: ICTDConfig) -> Float[Tensor, "head d_model d_model"]:
    """Paper mask: a head writes one row only, the current value (TSM; dual head 0) or the
    target value (dual head 1)."""
    m = torch.ones(cfg.n_heads, cfg.d_model, cfg.d_model, dtype=cfg.torch_dtype)
    if cfg.mask == "paper":
        layout = PromptLayout(cfg.d_features)
        m.zero_()
        m[0, layout.current] = 1.0
        if cfg.form == "dual":
            m[1, layout.target] = 1.0
    return m
