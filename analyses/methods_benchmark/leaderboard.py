"""The benchmark's leaderboard: one row per edge method × case (``results.json``) and the table the report opens
with, every method ranked by its mean AUROC over the cases, beside the reference rows a score reads against:
*truth* (the true edges first, tied: AUROC 1; its CMD is the true edges' in the graph's order, a reference, not a
floor: a ranking that orders the true edges by their effect can go lower), *activation-patching* (exact patching),
*weight-reader* (the weights alone, no forward pass) and *random* (chance)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from ictd_interp.analyses.methods_benchmark.evaluate import CellResult
from ictd_interp.analyses.methods_benchmark.methods import REFERENCES, TRUTH
from ictd_interp.analyses.methods_benchmark.selection import cases_of, edge_methods, interval

SCORES = ("auroc", "auprc", "cmd", "cpr")  # each row's scores, a mean over seeds with its interval


def rows(cells: Sequence[CellResult], request: Optional[dict[str, Any]] = None) -> list[dict]:
    """One row per edge method × case: each score's mean and interval over the seeds, the seeds scored and
    failed, the mean seconds per cell, the plugin's SHA-256 (``built-in`` for the package's own), and the split
    (with the private key's fingerprint) from the run's ``request``."""
    request = request or {}
    split, fingerprint, hashes = request.get("split", "public"), request.get("key_fingerprint"), plugin_hashes(request)
    out = []
    for m in edge_methods(cells):
        for c in cases_of(cells):
            here = [x for x in cells if x.case == c]
            found = {k: interval(cells, c, m, k) for k in SCORES}
            times = [x.seconds[m] for x in here if m in x.seconds]
            out.append(
                {
                    "method": m,
                    "case": c,
                    "split": split,
                    "key_fingerprint": fingerprint,
                    "reference": m == TRUTH or m in REFERENCES,
                    **{k: (v.to_dict() if v else None) for k, v in found.items()},
                    "seeds": sum(m in x.scores for x in here),
                    "failed_seeds": sum(m in x.failed for x in here),
                    "seconds_per_cell": sum(times) / len(times) if times else None,
                    "plugin_sha256": hashes.get(m, "built-in"),
                }
            )
    return out


def ranked(table: list[dict]) -> list[tuple[str, float]]:
    """Each method's mean AUROC over the cases, best first (ties share a rank in ``lines``)."""
    means = {}
    for m in dict.fromkeys(r["method"] for r in table):
        values = [r["auroc"]["mean"] for r in table if r["method"] == m and r["auroc"]]
        means[m] = sum(values) / len(values) if values else math.nan
    return sorted(means.items(), key=lambda kv: (math.isnan(kv[1]), -kv[1]))  # a method with no AUROC last


def lines(table: list[dict]) -> list[str]:
    """The leaderboard table (markdown): rank, method, mean AUROC over the cases, and each case's AUROC."""
    if not table:
        return []
    cases = list(dict.fromkeys(r["case"] for r in table))
    by = {(r["method"], r["case"]): r for r in table}
    split = table[0]["split"]
    sealed = (
        f" On the **private split**: every case drawn from seeds a key decides (fingerprint "
        f"`{table[0]['key_fingerprint']}`), which no method saw; compare only with the same key's runs."
        if split == "private"
        else ""
    )
    out = [
        "",
        "## Leaderboard" + (" (private split)" if split == "private" else ""),
        "",
        "Edge methods ranked by their AUROC averaged over the cases (each case's mean over its seeds). Rows in "
        "italics are references: *truth* (the true edges first), *activation-patching* (exact patching), "
        "*weight-reader* (the weights alone, never a forward pass: a case it solves does not need activations) and "
        "*random* (chance). A method's score reads against them." + sealed,
        "",
        "| rank | method | mean AUROC | " + " | ".join(cases) + " |",
        "|" + "---|" * (len(cases) + 3),
    ]
    rank, previous = 0, None
    for k, (m, mean) in enumerate(ranked(table), start=1):
        rank = rank if previous is not None and mean == previous else k
        previous = mean
        name = f"*{m}*" if by[(m, cases[0])]["reference"] else m
        cells = [f"{by[(m, c)]['auroc']['mean']:.3f}" if (m, c) in by and by[(m, c)]["auroc"] else "—" for c in cases]
        out.append(f"| {rank} | {name} | {mean:.3f} | " + " | ".join(cells) + " |")
    return out


def write(table: list[dict], out_dir: Path) -> Path:
    """``results.json``: the rows, for a reader's own table or a submission's comparison."""
    import json

    path = Path(out_dir) / "results.json"
    path.write_text(json.dumps({"rows": table}, indent=1))
    return path


def plugin_hashes(request: dict[str, Any]) -> dict[str, str]:
    """Each plugin method's file hash, as the request recorded it (``run._request``): method name -> SHA-256."""
    return dict(request.get("plugin_methods", {}))
