"""The constructed parameters theta* (docs/theory.md §4), as small pure functions.

Derivation (one layer, TSM form, ``z_i = (x_i, R_{i+1}, gamma v_{i+1}, v_i)``):

* Scores. With ``A* = diag(I_d, 0, 0, 0)``, ``z_i^T A* z_j = <x_i, x_j>``: the softmax over sources
  ``i < n`` is exactly the kernel ``K(S_i, S_j)`` of softmax-weighted TD, whatever the value rows hold.
* Values. With ``u = e_d + e_{d+1} - e_{d+2}``, ``u^T z_i = R_{i+1} + gamma v_{i+1} - v_i = delta_{i+1}``,
  the TD error of transition ``i+1``. ``V* = alpha e_{d+2} u^T`` writes it into the current row only, so
  ``Z~[d+2, j] = v_j + alpha sum_i delta_{i+1} K(S_i, S_j)``: one synchronous TD step.
* Shift. The TSM sets the target row to ``gamma * Z~[d+2, j+1]`` (0 at the query), which restores the
  prompt invariant for the next layer. Induction over layers gives Theorem 1: row ``d+2`` after
  ``l`` layers is the TD iterate ``v_l``.
* Dual form. The second head uses the same pattern and ``V*_tar = gamma V*`` moved to the target row;
  shifting its output to the predecessor column adds ``gamma (v_{j+1}' - v_{j+1})`` to the target row
  of column ``j``, the same rewrite as the TSM as long as the target row started consistent (it does:
  0 = gamma * 0 in ``Z_0``, and the query's target stays 0 because the shift fills it with 0).
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.config.stylised import ICTDConfig
from ictd_interp.models.hook_names import attn_param
from ictd_interp.tasks.prompt import PromptLayout

# TD's signature, the one definition every metric, figure and report reads: the update adds the reward and
# the (discounted) next value and subtracts the current value, delta = R + gamma v' - v.
SIGNATURE_INPUTS = ("reward", "next value", "current value")  # prompt rows: reward, target, current
SIGNATURE_SIGNS = (1.0, 1.0, -1.0)
SIGNATURE_TEXT = "(+, +, −)"


def td_direction(d: int) -> Float[Tensor, "d_model"]:
    """``u = e_d + e_{d+1} - e_{d+2}``: reads ``R + gamma v' - v`` off a column, the (+, +, -) signature."""
    layout = PromptLayout(d)
    u = torch.zeros(layout.d_model, dtype=torch.float64)
    u[[layout.reward, layout.target, layout.current]] = torch.tensor(SIGNATURE_SIGNS, dtype=torch.float64)
    return u


def attention_star(d: int) -> Float[Tensor, "d_model d_model"]:
    """``A* = diag(I_d, 0, 0, 0)``: scores depend on features only."""
    a = torch.zeros(d + 3, d + 3, dtype=torch.float64)
    a[:d, :d] = torch.eye(d, dtype=torch.float64)
    return a


def value_star(d: int, alpha: float = 1.0) -> Float[Tensor, "d_model d_model"]:
    """``V* = alpha e_{d+2} u^T``: the current row receives ``alpha * delta``."""
    v = torch.zeros(d + 3, d + 3, dtype=torch.float64)
    v[PromptLayout(d).current] = alpha * td_direction(d)
    return v


def target_value_star(d: int, gamma: float, alpha: float = 1.0) -> Float[Tensor, "d_model d_model"]:
    """``V*_tar = alpha gamma e_{d+1} u^T``: the dual form's second head, shifted by ``Pi``."""
    v = torch.zeros(d + 3, d + 3, dtype=torch.float64)
    v[PromptLayout(d).target] = alpha * gamma * td_direction(d)
    return v


def layer_star(cfg: ICTDConfig, alpha: float = 1.0) -> dict[str, Float[Tensor, "head d_model d_model"]]:
    """``A`` and ``V`` of one layer, stacked over heads as the model stores them."""
    d = cfg.d_features
    values = [value_star(d, alpha)]
    if cfg.form == "dual":
        values.append(target_value_star(d, cfg.gamma, alpha))
    A = attention_star(d).expand(cfg.n_heads, -1, -1)
    return {"A": A.to(cfg.torch_dtype), "V": torch.stack(values).to(cfg.torch_dtype)}


def theta_star(cfg: ICTDConfig, alpha: float = 1.0) -> dict[str, Float[Tensor, "head d_model d_model"]]:
    """State dict of theta*: the same layer at every depth (tied or not)."""
    layer = layer_star(cfg, alpha)
    return {attn_param(l, name): w.clone() for l in range(cfg.n_layers) for name, w in layer.items()}


class TDCoefficients(NamedTuple):
    """A layer's coefficients in the TD family ``v <- v + K (a R + b v' + c v)`` (docs/theory.md §8); ``b`` and
    ``c`` None where they cannot be identified."""

    step: float
    b: Optional[float]
    c: Optional[float]


def theta_star_coefficients(gamma: float) -> TDCoefficients:
    """theta*'s coefficients: step ``a = 1``, next-value weight ``b = gamma``, current-value weight ``c = -1``."""
    return TDCoefficients(1.0, gamma, -1.0)
