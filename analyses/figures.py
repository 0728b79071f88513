"""Figures: each a function of saved results (numbers, not live models) returning a Figure.

Built on ``matplotlib.figure.Figure`` (no pyplot global state) with seaborn's colour-blind palette.
"""

from __future__ import annotations

import io
from typing import Mapping, Optional, Sequence

import numpy as np
import seaborn as sns
from matplotlib.figure import Figure as MatplotlibFigure

PALETTE = sns.color_palette("colorblind")
SIGNATURE_LABELS = ("reward", "target", "current")


class Figure(MatplotlibFigure):
    """A matplotlib Figure that shows itself as a PNG in any Jupyter kernel (``display(fig)`` or a
    cell's last line), whatever the matplotlib backend: no pyplot state is needed."""

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=100)
        return buffer.getvalue()


def _figure(ncols: int = 1, width: float = 5.0, height: float = 3.8) -> tuple[Figure, list]:
    fig = Figure(figsize=(width * ncols, height), layout="constrained")
    return fig, [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]


def attention_comparison(patterns: Mapping[str, np.ndarray]) -> Figure:
    """Attention patterns on the same prompt side by side, titled by the caller (e.g.
    ``{"trained, layer 0": ..., "$\\theta^*$, layer 0": ...}``); rows: query position j, columns: source i."""
    fig, axes = _figure(len(patterns), width=4.8)
    vmax = float(max(np.max(p) for p in patterns.values()))
    for ax, (name, data) in zip(axes, patterns.items()):
        ticks = max(1, len(data) // 8)
        sns.heatmap(np.asarray(data), ax=ax, cmap="viridis", vmin=0.0, vmax=vmax, xticklabels=ticks, yticklabels=ticks,
                    cbar_kws={"label": "attention weight"})
        ax.set(title=name, xlabel="source position i", ylabel="query position j")
    return fig


def grouped_kernel(M: np.ndarray, title: str = "grouped kernel M^_n") -> Figure:
    """``M^_n(s, s')``: mass a query in state s puts on sources in state s'."""
    fig, (ax,) = _figure()
    sns.heatmap(np.asarray(M), ax=ax, cmap="viridis", vmin=0.0, annot=len(M) <= 12, fmt=".2f",
                cbar_kws={"label": "attention mass"})
    ax.set(title=title, xlabel="source state s'", ylabel="query state s")
    return fig


def diagonality_curve(steps: Sequence[int], values: Sequence[float], gamma: float) -> Figure:
    """Kernel diagonality mean over training with the ``(1 + gamma)/2`` level of Assumption 5.1."""
    fig, (ax,) = _figure()
    ax.plot(steps, values, color=PALETTE[0], marker="o", ms=3, label="kernel diagonality mean")
    ax.axhline((1 + gamma) / 2, color=PALETTE[3], ls="--", label=f"(1 + gamma)/2 = {(1 + gamma) / 2:.2f}")
    ax.set(title="Kernel diagonality over training", xlabel="training step", ylabel="mean M^_n(s, s) (fraction)",
           ylim=(0, 1.02))
    ax.legend()
    return fig


def signature_bars(signature: Sequence[Sequence[Optional[float]]], star: Sequence[float] = (1.0, 1.0, -1.0)) -> Figure:
    """Per layer, the normalised (reward, target, current) weights beside theta*'s (+, +, -)."""
    fig, (ax,) = _figure(width=max(5.0, 1.6 * (len(signature) + 1)))
    groups = ["theta*"] + [f"layer {l}" for l in range(len(signature))]
    rows = [list(star)] + [[np.nan if v is None else v for v in s] for s in signature]
    width = 0.25
    for k, label in enumerate(SIGNATURE_LABELS):
        ax.bar(np.arange(len(groups)) + (k - 1) * width, [r[k] for r in rows], width, color=PALETTE[k], label=label)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(np.arange(len(groups)), groups)
    ax.set(title="Value-row signature (expected +, +, -)", xlabel="layer (missing bar: not identifiable)",
           ylabel="weight / largest |weight|", ylim=(-1.15, 1.15))
    ax.legend(title="input row")
    return fig


def cosine_curves(steps: Sequence[int], cos_A: Sequence[Sequence[float]], cos_V: Sequence[Sequence[float]]) -> Figure:
    """Weight-space cosine with theta* over training, one line per layer."""
    fig, axes = _figure(2)
    for ax, data, name in zip(axes, (cos_A, cos_V), ("A (QK)", "V (OV)")):
        data = np.asarray(data, dtype=float)
        for l in range(data.shape[1]):
            ax.plot(steps, data[:, l], color=PALETTE[l % len(PALETTE)], label=f"layer {l}")
        ax.set(title=f"cos({name}, theta*)", xlabel="training step", ylabel="cosine similarity", ylim=(-1.05, 1.05))
        ax.legend()
    return fig


def error_vs_depth(curves: Mapping[str, Sequence[float]], rates: Optional[Mapping[str, float]] = None,
                   one_minus_c: Optional[float] = None) -> Figure:
    """``||v_L - v_pi||_inf`` against depth (log scale), with fitted rates beside ``1 - C``."""
    fig, (ax,) = _figure()
    for k, (label, errors) in enumerate(curves.items()):
        extra = f" (rate {rates[label]:.3f})" if rates and label in rates else ""
        ax.plot(np.arange(len(errors)), errors, color=PALETTE[k], marker="o", ms=3, label=label + extra)
    ax.set_yscale("log")
    title = "Error versus depth" + (f" (1 - C = {one_minus_c:.3f})" if one_minus_c is not None else "")
    ax.set(title=title, xlabel="depth L (layers)", ylabel="||v_L - v_pi||_inf (value units)")
    ax.legend()
    return fig


def error_vs_context(lengths: Sequence[int], curves: Mapping[str, Sequence[float]]) -> Figure:
    """Final-layer error against context length: the statistical floor of Theorem 2."""
    fig, (ax,) = _figure()
    for k, (label, errors) in enumerate(curves.items()):
        ax.plot(lengths, errors, color=PALETTE[k], marker="o", ms=3, label=label)
    ax.set(xscale="log", yscale="log", title="Error versus context length",
           xlabel="context length n (transitions)", ylabel="||v_L - v_pi||_inf (value units)")
    ax.legend()
    return fig


def predicted_vs_true(predicted: Mapping[str, np.ndarray], true: np.ndarray) -> Figure:
    """Query predictions against ``v_pi`` of the query state."""
    fig, (ax,) = _figure()
    for k, (label, pred) in enumerate(predicted.items()):
        ax.scatter(true, pred, s=8, alpha=0.6, color=PALETTE[k], label=label)
    lo, hi = float(np.min(true)), float(np.max(true))
    ax.plot([lo, hi], [lo, hi], color="black", lw=0.8, ls="--", label="y = x")
    ax.set(title="Predicted versus true value", xlabel="v_pi(query state) (value units)",
           ylabel="predicted value (value units)")
    ax.legend()
    return fig


def scale_sweep(rows: Sequence[Mapping[str, float]], depth: int) -> Figure:
    """Assumption 5.1 margin and theta*'s error against the feature scale (inverse temperature)."""
    fig, axes = _figure(2)
    scales = [r["scale"] for r in rows]
    axes[0].plot(scales, [r["margin_mean"] for r in rows], color=PALETTE[0], marker="o", label="mean C")
    axes[0].plot(scales, [r["margin_min"] for r in rows], color=PALETTE[1], marker="s", label="min C")
    axes[0].axhline(0, color="black", lw=0.8)
    axes[0].set(title="Assumption 5.1 margin", xlabel="feature scale (inverse temperature)", ylabel="margin C")
    axes[0].legend()
    for k, key in enumerate(("error_depth_1", f"error_depth_{depth}")):
        axes[1].plot(scales, [r[key] for r in rows], color=PALETTE[k], marker="o", label=key.replace("_", " "))
    axes[1].set(yscale="log", title="theta* error", xlabel="feature scale (inverse temperature)",
                ylabel="||v_L - v_pi||_inf (value units)")
    axes[1].legend()
    return fig
