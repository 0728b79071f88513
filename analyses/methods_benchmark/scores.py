"""Scores of a method against a case's ground truth, as small pure functions with hand-worked tests
(tests/unit/test_methods_benchmark.py).

* ``auroc``: the probability that a true edge outranks a false one, ties counted one half (Mann–Whitney U / (P N));
  a random ranking scores 0.5 in expectation, a perfect one 1.
* ``average_precision`` (AUPRC): the mean, over the true edges, of the precision at each one's rank (ties broken
  against the method: a tied block counts as ranked false-first); its chance level is the share of true edges.
* ``angle_degrees``: the principal angle between two lines, ``arccos |cos|`` in degrees (0: the same direction up
  to sign; 90: orthogonal). A random direction in ``d`` dimensions sits near 90° for large ``d``.
* ``faithfulness``: how much of the full model's answer a circuit keeps when every edge outside it is patched to
  the corrupted run, ``1 − mean|circuit − full| / mean|corrupted − full|`` (1: all of it, 0: no better than the
  corrupted run).
* ``matched_correlations`` (the mean correlation coefficient, MCC, of feature-recovery benchmarks): each true
  feature matched to a distinct latent so that the summed |Pearson r| is largest (the Hungarian algorithm); the
  MCC is the mean over the true features of the matched |r|, a feature left without a latent (fewer latents than
  features) counting 0 (1: every feature is some latent up to scale; a constant latent correlates 0).

Every score refuses NaN and infinities in what it is given (``NonFinite``, naming the score and the input): a method
that returns one has failed on that cell, and the benchmark records the failure instead of a score.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Mapping

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from torch import Tensor


class MethodFailed(ValueError):
    """A method failed on a cell (the benchmark records why, and scores nothing of it there)."""


class NonFinite(MethodFailed):
    """A method's output holds NaN or an infinity: the method failed on that cell, and nothing is scored."""


def check_scores(score: str, scores: Mapping[Hashable, float]) -> None:
    """``NonFinite`` naming the score and the first item whose value is NaN or infinite."""
    bad = [k for k, v in scores.items() if not math.isfinite(float(v))]
    if bad:
        raise NonFinite(
            f"{score}: {len(bad)} of {len(scores)} scores are not finite (first: {bad[0]} = "
            f"{scores[bad[0]]}); a method's NaN or inf is a failure, never a rank"
        )


def check_tensor(score: str, name: str, values: Tensor) -> None:
    """``NonFinite`` naming the score and the input when ``values`` holds NaN or an infinity."""
    if not bool(torch.isfinite(values).all()):
        raise NonFinite(
            f"{score}: {name} holds {int((~torch.isfinite(values)).sum())} non-finite entries of "
            f"{values.numel()}; a method's NaN or inf is a failure, never a score"
        )


def auroc(scores: Mapping[Hashable, float], positives: Collection[Hashable]) -> float:
    """Area under the ROC curve of ``scores`` (higher: more likely in the circuit) against ``positives``."""
    check_scores("auroc", scores)
    pos = np.asarray([scores[k] for k in scores if k in positives], dtype=float)
    neg = np.asarray([scores[k] for k in scores if k not in positives], dtype=float)
    if not len(pos) or not len(neg):
        raise ValueError(f"auroc: needs true and false items, got {len(pos)} true and {len(neg)} false")
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))


def average_precision(scores: Mapping[Hashable, float], positives: Collection[Hashable]) -> float:
    """AUPRC as average precision; within a block of tied scores the false items are ranked first."""
    check_scores("average_precision", scores)
    items = sorted(scores, key=lambda k: (-scores[k], k in positives))
    n_pos = sum(k in positives for k in items)
    if not n_pos:
        raise ValueError("average_precision: needs at least one true item")
    hits, total = 0, 0.0
    for rank, key in enumerate(items, start=1):
        if key in positives:
            hits += 1
            total += hits / rank
    return total / n_pos


def roc_curve(scores: Mapping[Hashable, float], positives: Collection[Hashable]) -> tuple[list[float], list[float]]:
    """False- and true-positive rates at every threshold (tied scores enter together)."""
    check_scores("roc_curve", scores)
    n_pos = sum(k in positives for k in scores)
    n_neg = len(scores) - n_pos
    fpr, tpr, tp, fp = [0.0], [0.0], 0, 0
    for value in sorted({scores[k] for k in scores}, reverse=True):
        block = [k for k in scores if scores[k] == value]
        tp += sum(k in positives for k in block)
        fp += sum(k not in positives for k in block)
        fpr.append(fp / max(n_neg, 1))
        tpr.append(tp / max(n_pos, 1))
    return fpr, tpr


def angle_degrees(found: Tensor, truth: Tensor) -> float:
    """The principal angle between the lines through ``found`` and ``truth`` (``[d]`` each), in degrees."""
    check_tensor("angle_degrees", "the direction found", found)
    check_tensor("angle_degrees", "the true direction", truth)
    norm = float(found.norm() * truth.norm())
    if norm == 0.0:
        return 90.0
    cos = abs(float(torch.dot(found.double(), truth.double()))) / norm
    return math.degrees(math.acos(min(1.0, cos)))


def faithfulness(circuit: Tensor, full: Tensor, corrupted: Tensor) -> float:
    """``1 − mean|circuit − full| / mean|corrupted − full|`` over the tasks' query predictions."""
    for name, values in (
        ("the circuit's predictions", circuit),
        ("the full model's", full),
        ("the corrupted run's", corrupted),
    ):
        check_tensor("faithfulness", name, values)
    baseline = float((corrupted - full).abs().mean())
    if baseline == 0.0:
        raise ValueError("faithfulness: the corrupted run gives the full model's answers; nothing to recover")
    return 1.0 - float((circuit - full).abs().mean()) / baseline


def correlations(a: Tensor, b: Tensor) -> Tensor:
    """|Pearson r| of every column of ``a [samples, m]`` with every column of ``b [samples, k]``: ``[m, k]`` (a
    constant column correlates 0)."""
    check_tensor("correlations", "the first sample", a)
    check_tensor("correlations", "the second sample", b)
    a, b = a.double() - a.double().mean(0), b.double() - b.double().mean(0)
    norms = a.norm(dim=0)[:, None] * b.norm(dim=0)[None, :]
    return torch.where(norms > 0, (a.T @ b).abs() / norms.clamp_min(1e-300), torch.zeros_like(norms))


def matched_correlations(truth: Tensor, latents: Tensor) -> tuple[float, dict[int, int]]:
    """The MCC of ``latents [samples, k]`` against ``truth [samples, m]``, and the latent matched to each true
    feature that has one (all of them when ``k >= m``)."""
    r = correlations(truth, latents).numpy()
    rows, cols = linear_sum_assignment(r, maximize=True)
    return float(r[rows, cols].sum() / truth.shape[1]), {int(i): int(j) for i, j in zip(rows, cols)}
