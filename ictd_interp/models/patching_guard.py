"""The guard that keeps TransformerLens's patching functions from sweeping the wrong axis of an ICTD prompt."""

from __future__ import annotations

import contextlib
import contextvars
import functools

# TransformerLens's ``patching.get_act_patch_*`` read the position count from the input's last axis
# (token ids ``[batch, pos]``); ICTD prompts are ``[batch, pos, d_model]``, so called directly they
# would sweep ``d_model`` positions and return a silently wrong table. ``ictd_interp.hooks.tl_patching`` builds the
# right index and runs them inside ``token_patching_allowed``; anywhere else they are refused.
_TOKEN_PATCHING = contextvars.ContextVar("ictd_token_patching", default=False)
PATCHING_MESSAGE = (
    "transformer_lens.patching reads the number of positions from the input's last axis (token ids "
    "[batch, pos]); ICTD prompts are [batch, pos, d_model], so it would sweep d_model = {d} 'positions' "
    "instead of {n}. Call it through ictd_interp.hooks.tl_patching(patch_fn, model, corrupted, clean_cache, metric), "
    "which passes the right index and returns the table shaped by its axes."
)


@contextlib.contextmanager
def token_patching_allowed():
    """Inside, ``run_with_hooks`` lets ``transformer_lens.patching``'s hooks through (``hooks.tl_patching``)."""
    token = _TOKEN_PATCHING.set(True)
    try:
        yield
    finally:
        _TOKEN_PATCHING.reset(token)


def from_tl_patching(fn) -> bool:
    inner = fn.func if isinstance(fn, functools.partial) else fn
    return getattr(inner, "__module__", "") == "transformer_lens.patching"


def patching_allowed() -> bool:
    """Whether the caller is inside ``token_patching_allowed``."""
    return _TOKEN_PATCHING.get()
