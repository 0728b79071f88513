"""Readings scored as classifiers of the population's labels (pure functions of the checkpoint records).

For each reading and each comparison (positives: checkpoints labelled ``runs TD``; negatives: ``COMPARISONS``):

* **AUROC** — the chance that a random positive scores above a random negative, ties counting one half (the
  Mann-Whitney statistic); 0.5 is a coin, 1 a perfect separation. A missing score (``None``: the reading could
  not be made) ranks below every score.
* **balanced accuracy** of the reading's rule — the mean of its true-positive and true-negative rates.
* **false-discovery rate** of the rule over the whole population — of the checkpoints it calls TD, the share
  that do not run TD.

Each comes with a 95% percentile interval from ``N_BOOT`` resamples of **runs** with replacement (a cluster
bootstrap: a run's checkpoints share its seed and data, so they are not independent draws), seeded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ictd_interp.analyses.methods_benchmark.checkpoints.population import LABELS

N_BOOT = 2000
SEED = 0
POSITIVE = LABELS[0]

Record = dict[str, Any]
COMPARISONS: dict[str, Callable[[Record], bool]] = {
    "TD vs stopped early": lambda r: r["label"] == LABELS[1] and r["objective"] == "td",
    "TD vs other objectives": lambda r: r["label"] != POSITIVE and r["objective"] != "td",
    "TD vs all others": lambda r: r["label"] != POSITIVE,
}


def known(r: Record) -> bool:
    """Whether a checkpoint's answer is known: a decided label, or an objective other than TD (a model trained on MC
    returns, the true values or shuffled rewards, or untrained, is a negative whatever its first level's sample
    says; an undecided TD-trained checkpoint is left out)."""
    return r["label"] in LABELS or r["objective"] != "td"


@dataclass(frozen=True)
class Estimate:
    value: Optional[float]  # None: the sample has no positive or no negative
    lo: Optional[float]
    hi: Optional[float]

    def text(self, fmt: str = ".2f") -> str:
        if self.value is None:
            return "–"
        return f"{self.value:{fmt}} [{self.lo:{fmt}}, {self.hi:{fmt}}]"


def auroc(pos: np.ndarray, neg: np.ndarray) -> Optional[float]:
    """P(pos > neg) + P(pos = neg) / 2 over every pair (``-inf`` for a missing score)."""
    if len(pos) == 0 or len(neg) == 0:
        return None
    greater = (pos[:, None] > neg[None, :]).mean()
    ties = (pos[:, None] == neg[None, :]).mean()
    return float(greater + ties / 2)


def balanced_accuracy(pos_calls: np.ndarray, neg_calls: np.ndarray) -> Optional[float]:
    if len(pos_calls) == 0 or len(neg_calls) == 0:
        return None
    return float((pos_calls.mean() + (1 - neg_calls.mean())) / 2)


def false_discovery(calls: np.ndarray, positive: np.ndarray) -> Optional[float]:
    return None if not calls.any() else float((calls & ~positive).sum() / calls.sum())


def _column(records: Sequence[Record], reading: str) -> np.ndarray:
    return np.array([-np.inf if r["readings"][reading] is None else r["readings"][reading] for r in records])


def _statistics(records: Sequence[Record], reading: str, threshold: float) -> dict[str, Optional[float]]:
    score = _column(records, reading)
    calls = score >= threshold
    positive = np.array([r["label"] == POSITIVE for r in records])
    out: dict[str, Optional[float]] = {"fdr": false_discovery(calls, positive)}
    for name, negative in COMPARISONS.items():
        neg = np.array([negative(r) for r in records])
        out[f"auroc:{name}"] = auroc(score[positive], score[neg])
        out[f"balanced:{name}"] = balanced_accuracy(calls[positive], calls[neg])
    return out


def score_reading(records: Sequence[Record], reading: str, threshold: float) -> dict[str, Estimate]:
    """Every statistic of one reading on the ``known`` records, with its cluster-bootstrap interval."""
    records = [r for r in records if known(r)]
    point = _statistics(records, reading, threshold)
    runs = sorted({r["run"] for r in records})
    by_run = {run: [r for r in records if r["run"] == run] for run in runs}
    rng = np.random.default_rng(SEED)
    draws: dict[str, list[float]] = {k: [] for k in point}
    for _ in range(N_BOOT):
        sample = [r for run in rng.choice(runs, size=len(runs)) for r in by_run[run]]
        for k, v in _statistics(sample, reading, threshold).items():
            if v is not None:
                draws[k].append(v)
    return {
        k: Estimate(v, *(np.percentile(draws[k], [2.5, 97.5]).tolist() if draws[k] else (None, None)))
        for k, v in point.items()
    }


def counts(records: Sequence[Record]) -> dict[str, Any]:
    """How many checkpoints and runs hold each label and objective (``undecided`` included)."""
    out: dict[str, Any] = {"checkpoints": len(records), "runs": len({r["run"] for r in records})}
    for key in ("label", "objective"):
        values = sorted({r[key] for r in records})
        out[key] = {v: sum(r[key] == v for r in records) for v in values}
    return out
