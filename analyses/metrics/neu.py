"""The NEU loss (norm of the expected TD update, docs/theory.md §6) at the right (n, L): Theorem 3 is a
statement about long contexts then deep models, not about the training setting.

For a model with parameters ``theta`` and windows ``t`` of a trajectory, ``u = E[delta_t grad v^_t]``.
Two numbers are reported per context length ``n`` and depth ``L``:

* ``population``: an unbiased estimate of ``||E u||^2``, the inner product of ``u`` on two independent
  halves of a batch of tasks (``objectives.neu_unbiased``), averaged over ``repeats`` batches with a
  t interval over them (the same seeded batches for every model, so models compare paired);
* ``batch``: ``||u||^2`` on one batch of ``tasks_per_batch`` tasks, what NEU training minimises; in
  expectation it is ``population + trace(Cov u) / B``, so a model can look like a NEU minimiser at a
  small batch only because of the variance term.

Compared: theta* at depth ``L``, the zero predictor (``A = V = 0``: ``v^ = 0``, ``delta = R``) and, at its
own depth, a given model. With the same parametrisation (tied or per-layer) for all three.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Optional

import torch

from analyses.metrics.intervals import paired, t_interval
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.training.batches import window_batch
from ictd_interp.training.objectives import expected_update, neu_unbiased
from ictd_interp.io.progress import progress_bar
from ictd_interp.config.tasks import TaskDistribution

LENGTHS, DEPTHS = (10, 30, 100), (1, 3, 6, 12, 24)


@torch.no_grad()
def zero_predictor(cfg) -> HookedICTDTransformer:
    """``A = V = 0``: every value stays 0 (its NEU is that of the TD errors ``delta = R``)."""
    model = HookedICTDTransformer.from_theta_star(cfg)
    for param in model.parameters():
        param.zero_()
    return model


def neu_values(model: HookedICTDTransformer, dist: TaskDistribution, tasks_per_batch: int, n_windows: int,
               repeats: int, seed: int) -> dict[str, Any]:
    """Population (unbiased) and batch NEU of ``model`` on ``repeats`` batches drawn from ``dist``."""
    gen = torch.Generator().manual_seed(seed)
    pop, batch = [], []
    dtype = model.cfg.torch_dtype
    for _ in range(repeats):
        data = window_batch(dist, tasks_per_batch, n_windows, generator=gen).to(model.device, dtype)
        pop.append(neu_unbiased(model, data))
        batch.append(float(expected_update(model, data).pow(2).sum()))
    return {"population": t_interval(pop).to_dict(), "batch": t_interval(batch).to_dict(), "population_values": pop}


def neu_grid(cfg, dist: TaskDistribution, model: Optional[HookedICTDTransformer] = None,
             lengths: Sequence[int] = LENGTHS, depths: Sequence[int] = DEPTHS, tasks_per_batch: int = 32,
             n_windows: int = 9, repeats: int = 4, seed: int = 0, progress: bool = False) -> dict[str, Any]:
    """NEU of theta* and of the zero predictor for every ``(n, L)``, and of ``model`` at its own depth
    for every ``n``; all in float64 on the same seeded batches per ``n``."""
    cfg = replace(cfg, dtype="float64")
    # a float64 copy: ``.to`` converts a module in place, and the caller's model must stay as it is
    model64 = copy.deepcopy(model).to(torch.float64) if model is not None else None
    rows = []
    cells = [(n, L) for n in lengths for L in depths]
    bar = progress_bar(total=len(cells), disable=not progress, desc="neu")
    for n, L in cells:
        at = replace(dist, context_len=n)
        deep = replace(cfg, n_layers=L)
        row = {"context_len": n, "depth": L,
               "theta_star": neu_values(HookedICTDTransformer.from_theta_star(deep), at, tasks_per_batch, n_windows,
                                        repeats, seed + n),
               "zero": neu_values(zero_predictor(deep), at, tasks_per_batch, n_windows, repeats, seed + n)}
        if model is not None and L == model.cfg.n_layers:
            row["model"] = neu_values(model64, at, tasks_per_batch, n_windows, repeats, seed + n)
        rows.append(row)
        bar.update(1)
    bar.close()
    return {"tasks_per_batch": tasks_per_batch, "windows_per_task": n_windows, "repeats": repeats, "rows": rows,
            "sentence": neu_sentence(rows)}


def neu_sentence(rows: list[dict[str, Any]]) -> str:
    """Where theta*'s population NEU is below or above the zero predictor's: both are measured on the same
    seeded batches, so the rule is the paired t interval of their difference (it must exclude 0)."""
    verdicts = {(r["context_len"], r["depth"]): paired(r["theta_star"]["population_values"],
                                                       r["zero"]["population_values"]).verdict for r in rows}
    fmt = lambda v: ", ".join(f"(n={n}, L={L})" for (n, L), x in verdicts.items() if x == v) or "none"  # noqa: E731
    return (f"θ*'s population NEU is below the zero predictor's (paired 95% t interval over the repeats) at "
            f"{fmt('lower')}; above it at {fmt('higher')}; elsewhere the repeats cannot tell them apart. Theorem 3 "
            "makes θ* a minimiser only as n → ∞ and then L → ∞, not at the training setting.")


def population_table(result: dict[str, Any]) -> list[str]:
    """Markdown rows: population NEU of θ*, the zero predictor and the model per (n, L)."""
    lines = ["| n | L | θ* | zero predictor | model (its own depth) |", "|---|---|---|---|---|"]  # t interval over repeats
    for r in result["rows"]:
        cell = lambda d: (f"{d['population']['mean']:.2e} [{d['population']['lo']:.1e}, {d['population']['hi']:.1e}] "  # noqa: E731
                          f"(batch {d['batch']['mean']:.2e})")
        lines.append(f"| {r['context_len']} | {r['depth']} | {cell(r['theta_star'])} | {cell(r['zero'])} | "
                     f"{cell(r['model']) if 'model' in r else '–'} |")
    return lines

