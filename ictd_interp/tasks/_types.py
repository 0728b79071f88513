"""Input conversion with clear errors, and the shape vocabulary of the annotations.

Axes: ``batch`` (prompts), ``pos`` (context positions, the last one is the query),
``d_model`` (= d_feat + 3 prompt rows), ``head``, ``d_head``, ``d_feat`` (features),
``query_pos``/``key_pos`` (attention targets and sources), ``state``, ``iter``.
"""

from typing import Union

import numpy as np
import torch

ArrayLike = Union[torch.Tensor, np.ndarray, list, tuple]


def as_tensor(value: ArrayLike, name: str, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Convert user input to a tensor, naming the field when that fails."""
    try:
        return torch.as_tensor(np.asarray(value) if isinstance(value, (list, tuple)) else value, dtype=dtype)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{name}: cannot convert {type(value).__name__} to a tensor ({err})") from None


def tensor_fields(obj: object, *names: str) -> None:
    """Convert a frozen dataclass's array fields in place (``as_tensor``, float64), each error naming its field."""
    for name in names:
        object.__setattr__(obj, name, as_tensor(getattr(obj, name), name))
