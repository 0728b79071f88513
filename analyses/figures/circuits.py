"""Figures of the circuit search in a standard model (``ictd_interp.analyses.reports.standard``): from saved numbers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import seaborn as sns

from ictd_interp.analyses.figures.plots import sign_bars
from ictd_interp.analyses.figures.style import STAR, Figure, legend_outside, log_axis, new_figure, series_colours

QUANTITY_LABELS = {
    "reward": "$R_{j+1}$",
    "v_current": r"$v_\pi(S_j)$",
    "v_next": r"$v_\pi(S_{j+1})$",
    "td_error": r"$\delta_{j+1}$",
}


def site_labels(n_sites: int) -> list[str]:
    return ["embed"] + [f"after {l}" for l in range(n_sites - 1)]


def probe_error_vs_depth(curves: Mapping[str, Sequence[float]]) -> Figure:
    """MSVE against ``v_pi`` of the value read at each site (a probe, or θ*'s stored row)."""
    fig, (ax,) = new_figure(width=6.4)
    for colour, (label, errors) in zip(series_colours(list(curves)), curves.items()):
        ax.plot(np.arange(len(errors)), errors, color=colour, marker="o", ms=3, label=label.replace("theta*", STAR))
    n_sites = max(len(e) for e in curves.values())
    ax.set_xticks(np.arange(n_sites), site_labels(n_sites))
    ax.set_yscale("log")
    log_axis(ax.yaxis)
    ax.set(
        title="Value error versus depth (read by a linear probe)",
        xlabel="residual stream site (blocks run)",
        ylabel=r"MSVE against $v_\pi$ (value units$^2$)",
    )
    legend_outside(ax)
    return fig


def probe_map(r2: Mapping[str, Sequence[float]], title: str) -> Figure:
    """Held-out R² of each TD-quantity probe (columns) at each site (rows)."""
    names = list(r2)
    data = np.asarray([r2[n] for n in names], dtype=float).T
    fig, (ax,) = new_figure(width=5.6, height=0.55 * len(data) + 1.8)
    sns.heatmap(
        data,
        ax=ax,
        cmap="viridis",
        vmin=0.0,
        vmax=1.0,
        annot=True,
        fmt=".2f",
        xticklabels=[QUANTITY_LABELS.get(n, n) for n in names],
        yticklabels=site_labels(len(data)),
        cbar_kws={"label": "held-out $R^2$"},
    )
    ax.set(title=title, xlabel="quantity at context column j", ylabel="residual stream site")
    return fig


def head_map(rows: Sequence[Any], key: str, title: str, label: str) -> Figure:
    """A per-head number (the attribute ``key`` of rows with ``layer`` and ``head``, e.g. ``HeadKernel``) as a
    layer x head heatmap."""
    n_layers, n_heads = 1 + max(r.layer for r in rows), 1 + max(r.head for r in rows)
    data = np.full((n_layers, n_heads), np.nan)
    for r in rows:
        data[r.layer, r.head] = getattr(r, key)
    fig, (ax,) = new_figure(width=1.1 * n_heads + 3.2, height=0.6 * n_layers + 1.8)
    sns.heatmap(data, ax=ax, cmap="vlag", vmin=-1.0, vmax=1.0, annot=True, fmt=".2f", cbar_kws={"label": label})
    ax.set(title=title, xlabel="head", ylabel="layer")
    return fig


def probed_signature_bars(rows: Sequence[Any], title: str) -> Figure:
    """Per head (``Signature`` rows with ``head`` set) or per layer, the moves of the probed value under reward,
    next-value and current-value perturbations, all divided by one scale (the largest move of any row),
    so heads' strengths compare; θ*'s (+, +, −) beside them for the signs."""
    groups = [f"L{r.layer}H{r.head}" if r.head is not None else f"layer {r.layer}" for r in rows]
    read = [[None if n is None else g for g, n in zip(r.raw, r.normalised)] for r in rows]  # n/a: not drawn
    scale = max((abs(g) for row in read for g in row if g is not None), default=1.0) or 1.0
    fig, ax = sign_bars(
        groups, [[np.nan if g is None else float(np.clip(g / scale, -3, 3)) for g in row] for row in read]
    )
    ax.set(
        title=title,
        xlabel=("layer L, head H" if rows[0].head is not None else "layer") + " (missing bar: not identifiable)",
        ylabel="probed-value move / largest |move|",
    )
    legend_outside(ax, title="perturbed input")
    return fig


def patching_heatmap(table: pd.DataFrame, column: str = "recovered") -> Figure:
    """Hook × position heat map of a patching table."""
    grid = table.pivot(index="hook", columns="position", values=column).reindex(table["hook"].unique())
    # tall enough for the colorbar label whatever the number of hooks (two hooks used to clip it)
    fig = Figure(figsize=(1.0 + 0.35 * grid.shape[1], max(3.2, 1.0 + 0.3 * grid.shape[0])), layout="constrained")
    ax = fig.add_subplot()
    sns.heatmap(grid, ax=ax, cmap="vlag", center=0.0, cbar_kws={"label": f"{column}\n(fraction of the clean effect)"})
    ax.set(title="Activation patching: clean into corrupted", xlabel="position patched", ylabel="hook")
    return fig
