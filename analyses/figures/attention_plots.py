"""Attention patterns from an ``ActivationCache`` drawn with circuitsvis (positions labelled by state)."""

from __future__ import annotations

from pathlib import Path

from transformer_lens.ActivationCache import ActivationCache

__all__ = ["attention_view", "position_labels"]


def position_labels(n_positions: int) -> list[str]:
    """``S_0 ... S_{n-1}, S_n (query)``: the state each prompt column holds."""
    return [f"S_{j}" for j in range(n_positions - 1)] + [f"S_{n_positions - 1} (query)"]


class OfflineHTML:
    """A self-contained HTML view (its script inlined, nothing fetched): renders in Jupyter offline and
    saves as a page that opens in any browser without a network (``save``)."""

    def __init__(self, html: str, title: str):
        self.html, self.title = html, title

    def _repr_html_(self) -> str:
        return self.html

    def __str__(self) -> str:
        return self.html

    def save(self, path) -> Path:
        """A complete HTML page holding the view."""
        path = Path(path)
        path.write_text(
            f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{self.title}</title></head>"
            f"<body>{self.html}</body></html>",
            encoding="utf-8",
        )
        return path


def attention_view(cache: ActivationCache, layer: int, prompt_index: int = 0) -> OfflineHTML:
    """An interactive circuitsvis view of one layer's heads for one prompt (``pip install
    'ictd-interp[viz]'``), with circuitsvis's bundled script inlined, so it renders offline (circuitsvis's
    own ``str``/``show_code`` load the script from a CDN). ICTD attention is not causal (every query reads
    every context column, the query column is never a source), so no upper triangle is masked."""
    try:
        import circuitsvis as cv
    except ImportError:
        raise ImportError("attention_view needs circuitsvis: pip install 'ictd-interp[viz]'") from None
    pattern = cache["pattern", layer][prompt_index]  # [head, query_pos, key_pos]
    names = [f"L{layer}H{h}" for h in range(pattern.shape[0])]
    view = cv.attention.attention_heads(
        attention=pattern.float(),
        tokens=position_labels(pattern.shape[-1]),
        attention_head_names=names,
        mask_upper_tri=False,
    )
    return OfflineHTML(view.local_src, f"attention, layer {layer}")
