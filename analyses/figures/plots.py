"""Figures: each a function of saved results (numbers, not live models) returning a Figure.

Built on ``matplotlib.figure.Figure`` (no pyplot global state) with seaborn's colour-blind palette.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

import numpy as np
import seaborn as sns
from matplotlib.ticker import MaxNLocator

from ictd_interp.analyses.figures.style import (
    PALETTE,
    STAR,
    SUP_ERROR,
    Figure,
    legend_below,
    legend_outside,
    log_axis,
    new_figure,
    series_colours,
    wrapped,
    zoom,
)
from ictd_interp.models.stylised.theta_star import SIGNATURE_INPUTS, SIGNATURE_SIGNS, SIGNATURE_TEXT
from ictd_interp.reference.metrics import VALUE_INPUTS, signature_on_values

Numbers = Union[np.ndarray, Sequence]  # figures draw saved numbers: arrays or the nested lists of summary.json


def attention_comparison(patterns: Mapping[str, Numbers]) -> Figure:
    """Attention patterns on the same prompt side by side, titled by the caller (e.g.
    ``{"trained, layer 0": ..., "$\\theta^*$, layer 0": ...}``); rows: query position j, columns: source i."""
    fig, axes = new_figure(len(patterns), width=4.8)
    vmax = float(max(np.max(p) for p in patterns.values()))
    for ax, (name, data) in zip(axes, patterns.items()):
        ticks = max(1, len(data) // 8)
        sns.heatmap(
            np.asarray(data),
            ax=ax,
            cmap="viridis",
            vmin=0.0,
            vmax=vmax,
            xticklabels=ticks,
            yticklabels=ticks,
            cbar_kws={"label": "attention weight"},
        )
        ax.set(title=name, xlabel="source position i", ylabel="query position j")
    return fig


def grouped_kernel(M: Numbers, title: str = r"grouped kernel $\hat M_n$") -> Figure:
    """``M^_n(s, s')``: mass a query in state s puts on sources in state s'; states the context never
    visited are masked (no data), not drawn as zero attention."""
    fig, (ax,) = new_figure()
    data = np.asarray(M, dtype=float)
    data[np.all(data == 0, axis=1)] = np.nan  # rows of unvisited states (saved as 0 in summary.json)
    sns.heatmap(
        data,
        ax=ax,
        cmap="viridis",
        vmin=0.0,
        annot=len(data) <= 12,
        fmt=".2f",
        mask=np.isnan(data),
        cbar_kws={"label": "attention mass"},
    )
    ax.set(title=title, xlabel="source state $s'$", ylabel="query state $s$ (blank: not visited)")
    return fig


def diagonality_curve(
    steps: Sequence[int],
    values: Sequence[float],
    gamma: float,
    heads: Optional[Sequence] = None,
    theta_star: Optional[float] = None,
    final_heads: Optional[Sequence] = None,
) -> Figure:
    """Kernel diagonality over training with the ``(1 + gamma)/2`` level of Assumption 5.1 and, when
    given, theta*'s own diagonality on the same tasks (what the features allow). ``heads``
    (``[step][layer][head]``) draws every head when there is more than one (a same-state head hides in a
    mean over heads), a tied model's once, as its layers are one; ``final_heads`` (``[layer][head]``, the
    trained model's) marks them at the last step when the run did not log them."""
    fig, (ax,) = new_figure(width=6.2)
    ax.plot(steps, values, color=PALETTE[0], marker="o", ms=3, label="mean over layers and heads")
    per_head = np.asarray(heads, dtype=float) if heads is not None else None
    tied = per_head is not None and per_head.ndim == 3 and np.allclose(per_head, per_head[:, :1], equal_nan=True)
    if tied:  # every layer the same (a tied model): its heads once
        per_head = per_head[:, :1]
    if per_head is not None and per_head.ndim == 3 and per_head.shape[1] * per_head.shape[2] > 1:
        for k, (l, h) in enumerate(np.ndindex(*per_head.shape[1:])):
            ax.plot(
                steps,
                per_head[:, l, h],
                color=PALETTE[(k + 4) % len(PALETTE)],
                lw=1,
                label=f"all layers (tied) H{h}" if tied else f"L{l}H{h}",
            )
    elif final_heads is not None and sum(len(row) for row in final_heads) > 1:
        for k, (l, h) in enumerate((l, h) for l, row in enumerate(final_heads) for h in range(len(row))):
            ax.plot(
                [steps[-1]],
                [final_heads[l][h]],
                ls="none",
                marker="D",
                color=PALETTE[(k + 4) % len(PALETTE)],
                label=f"L{l}H{h} (final model)",
            )
    ax.axhline((1 + gamma) / 2, color=PALETTE[3], ls="--", label=rf"$(1+\gamma)/2$ = {(1 + gamma) / 2:.2f}")
    if theta_star is not None:
        ax.axhline(theta_star, color=PALETTE[2], ls=":", label=f"{STAR} on these tasks = {theta_star:.2f}")
    ax.set(
        title="Kernel diagonality over training",
        xlabel="training step",
        ylabel=r"mean $\hat M_n(s, s)$ (fraction)",
        ylim=(0, 1.02),
    )
    legend_outside(ax)
    return fig


def _layers_once(data: np.ndarray, tied: bool) -> list[tuple[str, np.ndarray]]:
    """One line per layer, or one line labelled "all layers (tied)" when they are identical."""
    if tied or (data.shape[1] > 1 and np.allclose(data, data[:, :1], equal_nan=True)):
        return [("all layers (tied)", data[:, 0])]
    return [(f"layer {l}", data[:, l]) for l in range(data.shape[1])]


def signature_bars(
    signature: Sequence[Sequence[Optional[float]]], tied: bool = False, gamma: Optional[float] = None
) -> Figure:
    """Per layer, the normalised value-row weights on (reward, next value, current value) beside θ*'s (+, +, −).
    With ``gamma`` the next-value bar is the weight on v(S') itself (γ times the target row's, which holds γ v(S')),
    renormalised, so the bars read as the report's numbers: effective discount = next / |current|."""
    rows = signature if gamma is None else [signature_on_values(list(s), gamma) for s in signature]
    data = np.asarray([[np.nan if v is None else v for v in s] for s in rows], dtype=float)
    layers = _layers_once(data.T, tied)  # rows: input, columns: layer
    reference = None if gamma is None else (1.0, gamma, -1.0)  # θ*'s weights on (R, v(S'), v(S)): discount γ
    labels = SIGNATURE_INPUTS if gamma is None else VALUE_INPUTS
    fig, ax = sign_bars([name for name, _ in layers], [list(values) for _, values in layers], reference, labels)
    title = "Value-row signature ($\\theta^*$: " + SIGNATURE_TEXT[1:-1] + ")"
    if gamma is not None:
        title += "; effective discount = weight on v(S') / |weight on v(S)|"
    ax.set(xlabel="layer (missing bar: not identifiable)", ylabel="weight / largest |weight|", ylim=(-1.15, 1.15))
    ax.set_title(wrapped(title, 50))
    legend_outside(ax, title="input row" if gamma is None else "weight on")
    return fig


def sign_bars(
    groups: Sequence[str],
    rows: Sequence[Sequence[float]],
    reference: Optional[Sequence[float]] = None,
    labels: Sequence[str] = SIGNATURE_INPUTS,
) -> tuple[Figure, object]:
    """Grouped bars of (reward, next value, current value) per group, θ*'s first (``reference``, default its signs):
    the drawing both signature figures share (``figures.circuits.probed_signature_bars`` is the other)."""
    groups, rows = [STAR, *groups], [list(reference or SIGNATURE_SIGNS), *rows]
    fig, (ax,) = new_figure(width=max(5.5, 0.9 * len(groups) + 2.5))
    width = 0.26
    for k, label in enumerate(labels):
        ax.bar(np.arange(len(groups)) + (k - 1) * width, [r[k] for r in rows], width, color=PALETTE[k], label=label)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(np.arange(len(groups)), groups)
    return fig, ax


def cosine_curves(
    steps: Sequence[int], cos_A: Sequence[Sequence[float]], cos_V: Sequence[Sequence[float]], tied: bool = False
) -> Figure:
    """Weight-space cosine with theta* over training, one line per layer (once when tied), the axis
    zoomed to the data so that 0.98 and 0.99 stay apart."""
    fig, axes = new_figure(2, width=4.8)
    for ax, data, name in zip(axes, (cos_A, cos_V), ("A", "V")):
        data = np.asarray(data, dtype=float)
        for k, (label, values) in enumerate(_layers_once(data, tied)):
            ax.plot(steps, values, color=PALETTE[k % len(PALETTE)], label=label)
        ax.axhline(1.0, color="grey", lw=0.8, ls=":")
        ax.set(title=rf"$\cos({name}, {name}^*)$", xlabel="training step", ylabel="cosine similarity", ylim=zoom(data))
    legend_outside(axes[-1])
    return fig


def error_vs_depth(
    curves: Mapping[str, Sequence[float]],
    fits: Optional[Mapping[str, Any]] = None,
    one_minus_c: Optional[float] = None,
    trained_depth: Optional[int] = None,
) -> Figure:
    """``||v_L - v_pi||_inf`` against depth (log scale); a curve with a fit (a ``GeometricFit``: rate,
    amplitude and floor) gets the fitted ``a rho^L + floor`` drawn dashed beside it. ``1 - C`` is quoted
    only when the Assumption 5.1 bound applies (``C > 0``). ``trained_depth``: a trained model's curve runs past
    it (its layers repeated), marked by a dotted line."""
    fig, (ax,) = new_figure(width=6.2)
    if trained_depth is not None:
        ax.axvline(trained_depth, color="grey", lw=0.8, ls=":", label=f"trained depth {trained_depth}")
    for colour, (label, errors) in zip(series_colours(list(curves)), curves.items()):
        depths = np.arange(len(errors))
        ax.plot(depths, errors, color=colour, marker="o", ms=3, label=label.replace("theta*", STAR))
        fit = (fits or {}).get(label)
        if fit is not None:  # in black over the curve it fits, naming it: a coloured dash hid under the markers
            ax.plot(
                depths,
                fit.amplitude * fit.rate**depths + fit.floor,
                color="black",
                ls="--",
                lw=1.2,
                zorder=5,
                label=rf"fit to {label.replace('theta*', STAR)}: $a\rho^L$ + floor, $\rho$ = {fit.rate:.3f}, "
                f"floor {fit.floor:.3g}",
            )
    ax.set_yscale("log")
    log_axis(ax.yaxis)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    title = "Error versus depth"
    if one_minus_c is not None:
        title += rf" ($1 - C$ = {one_minus_c:.3f})" if one_minus_c < 1 else " (C ≤ 0: no contraction bound)"
    ax.set(xlabel="depth L (layers)", ylabel=f"{SUP_ERROR} (value units)")
    ax.set_title(wrapped(title, 60))
    legend_below(ax, columns=1 if fits else 2)
    return fig


def depth_extrapolation(
    depths: Sequence[int],
    model: Sequence[float],
    theta_star: Sequence[float],
    trained_depth: int,
    verdict: str,
    name: str = "trained layers",
    reference: str = STAR,
) -> Figure:
    """MSVE when the learned layers are run to other depths, beside a construction (θ*) at the same depths."""
    fig, (ax,) = new_figure(width=6.2)
    mine, theirs = series_colours(["trained model", reference])
    ax.plot(depths, model, color=mine, marker="o", ms=4, label=name)
    ax.plot(depths, theta_star, color=theirs, marker="s", ms=3, ls="--", label=reference)
    ax.axvline(trained_depth, color="grey", lw=0.8, ls=":", label=f"trained depth {trained_depth}")
    ax.set(
        xscale="log",
        yscale="log",
        title=wrapped(f"Run beyond its trained depth: {verdict}", 55),
        xlabel="depth (layers applied)",
        ylabel=r"MSVE against $v_\pi$",
    )
    log_axis(ax.xaxis)
    log_axis(ax.yaxis)
    legend_outside(ax)
    return fig


def error_vs_context(lengths: Sequence[int], curves: Mapping[str, Sequence[float]], where: str = "") -> Figure:
    """Final-layer error against context length: the statistical floor of Theorem 2."""
    fig, (ax,) = new_figure(width=6.2)
    for colour, (label, errors) in zip(series_colours(list(curves)), curves.items()):
        ax.plot(
            lengths,
            errors,
            color=colour,
            marker="o",
            ms=3,
            label=label.replace("theta_star", STAR).replace("theta*", STAR),
        )
    ax.set(xscale="log", yscale="log", xlabel="context length n (transitions)", ylabel=f"{SUP_ERROR} (value units)")
    ax.set_title(
        wrapped("Error versus context length" + (f" ({where})" if where else ""), 50), fontsize=9 if where else None
    )
    log_axis(ax.xaxis)
    log_axis(ax.yaxis)
    legend_outside(ax)
    return fig


def predicted_vs_true(predicted: Mapping[str, Numbers], true: Numbers) -> Figure:
    """Query predictions against ``v_pi`` of the query state."""
    fig, (ax,) = new_figure(width=6.2)
    markers = ("o", "x", "^", "s", "+", "D")  # a shape per series: two near-equal colours are still told apart
    for k, (colour, (label, pred)) in enumerate(zip(series_colours(list(predicted)), predicted.items())):
        marker = markers[k % len(markers)]
        face = {"facecolors": "none", "edgecolors": colour} if marker in "o^sD" else {"color": colour}
        ax.scatter(true, pred, s=14, alpha=0.7, marker=marker, label=label.replace("theta_star", STAR), **face)
    lo, hi = float(np.min(true)), float(np.max(true))
    ax.plot([lo, hi], [lo, hi], color="black", lw=0.8, ls="--", label="y = x")
    ax.set(
        title="Predicted versus true value",
        xlabel=r"$v_\pi$(query state) (value units)",
        ylabel="predicted value (value units)",
    )
    legend_outside(ax)
    return fig


def scale_sweep(rows: Sequence[Mapping[str, float]], depth: int) -> Figure:
    """Assumption 5.1 margin and theta*'s error against the feature scale β (the kernel's inverse temperature is β²)."""
    fig, axes = new_figure(2)
    scales = [r["scale"] for r in rows]
    axes[0].plot(scales, [r["margin_mean"] for r in rows], color=PALETTE[0], marker="o", label="mean C")
    axes[0].plot(scales, [r["margin_min"] for r in rows], color=PALETTE[1], marker="s", label="min C")
    axes[0].axhline(0, color="black", lw=0.8)
    axes[0].set(
        title="Assumption 5.1 margin (holds above 0)",
        xlabel="feature scale β (kernel inverse temperature β²)",
        ylabel="margin C",
    )
    axes[0].legend()
    for k, key in enumerate(("error_depth_1", f"error_depth_{depth}")):
        axes[1].plot(
            scales, [r[key] for r in rows], color=PALETTE[k], marker="o", label=f"depth {key.rsplit('_', 1)[-1]}"
        )
    axes[1].set(
        yscale="log",
        title=f"{STAR} error",
        xlabel="feature scale β (kernel inverse temperature β²)",
        ylabel=f"{SUP_ERROR} (value units)",
    )
    log_axis(axes[1].yaxis)
    axes[1].legend()
    return fig


def linear_weights(P: Numbers, Q: Numbers, P_td: Numbers, Q_td: Numbers, d: int) -> Figure:
    """A linear model's ``P`` and ``Q`` (top) beside the TD(0) construction's (bottom), rows and columns named
    by the prompt block they touch (``phi``, ``gamma phi'``, ``r``); each matrix on its own symmetric scale. The
    trained pair is drawn on the sign that makes ``P[-1, -1] >= 0`` (``(P, Q) -> (-P, -Q)`` is the same layer).
    ``P`` writes row ``a`` from column entry ``b``; ``Q`` pairs source entry ``a`` with query entry ``b``
    (score ``z_i^T Q z_j``)."""
    fig = Figure(figsize=(9.0, 8.0), layout="constrained")
    names = [r"$\phi$"] * d + [r"$\gamma\phi'$"] * d + ["r"]
    panels = (
        ("trained P (layer 0; sign: P[-1, -1] ≥ 0)", P, "P"),
        ("trained Q (layer 0; same sign)", Q, "Q"),
        ("TD(0) construction P", P_td, "P"),
        ("TD(0) construction Q (C = I)", Q_td, "Q"),
    )
    for i, (title, W, kind) in enumerate(panels):
        ax = fig.add_subplot(2, 2, i + 1)
        data = np.asarray(W, dtype=float)
        bound = float(np.abs(data).max()) or 1.0
        sns.heatmap(
            data,
            ax=ax,
            cmap="RdBu_r",
            vmin=-bound,
            vmax=bound,
            square=True,
            xticklabels=names,
            yticklabels=names,
            cbar_kws={"label": "weight", "shrink": 0.8},
        )
        for edge in (d, 2 * d):
            ax.axhline(edge, color="black", lw=0.6)
            ax.axvline(edge, color="black", lw=0.6)
        labels = ("column entry read", "row written") if kind == "P" else ("query entry $z_j$", "source entry $z_i$")
        ax.set(title=title, xlabel=labels[0], ylabel=labels[1])
    return fig
