"""``claims.md`` and ``claims.json``: one row per claim, its verdict first, then what was run, the rule and
the numbers with their intervals and samples."""

from __future__ import annotations

import json
from pathlib import Path

from ictd_interp.analyses.claims.budget import Budget
from ictd_interp.analyses.claims.claim import Claim

RULES = (
    "A verdict is **holds**, **fails**, or **holds only when …** with the condition found (the settings, "
    "objectives or seeds where the claim's rule is met). Each row states its rule: which interval must exclude "
    "what; a claim about a limit, which a finite grid can only approach, is at most **consistent with the "
    "limit**, and a rule that no sample decided reads **not shown**. Intervals are 95%: Student-t over seeds, "
    "tasks or batches (paired where two estimators share them), Wilson for fractions (over independent units: "
    "seeds, not a tied model's layers), the delete-one-group jackknife for the NEU U-statistics."
)


TITLES = {
    "theorem1": "Theorem 1: θ* is softmax TD",
    "assumption51": "Assumption 5.1: C > 0",
    "theorem2_rate": "Theorem 2: geometric rate ≤ 1 − C",
    "theorem2_floor": "Theorem 2: floor → 0 as n grows",
    "theorem3": "Theorem 3: θ* minimises NEU",
    "emergence_weights": "Emergence: pretrained models learn in context",
    "emergence_weight_size": "Emergence: weights as large as θ*'s",
    "emergence_diagonality": "Emergence: attention grows diagonal",
    "emergence_signature": "Emergence: (+, +, −) signature",
    "finding_iteration": "Finding: the learned layer, iterated",
    "finding_iteration_deep": "Finding: the deep recipe's layer, iterated",
    "finding_iteration_deep_long": "Finding: the deep-long recipe's layer, iterated (n = 100)",
    "finding_iteration_deep_spectral": "Finding: the spectral-penalty recipe's layer, iterated (n = 100, 48 layers)",
    "finding_iteration_horizon": "Finding: the γ = 0.97 recipe's layer, iterated (384 layers)",
    "finding_baseline": "Finding: beats the constant predictor",
    "finding_depth_sampling": "Finding: depth-sampled training",
    "finding_same_state_head": "Finding: the standard model's same-state head",
    "control_constructions": "Beyond the paper: θ* runs SARSA, expected SARSA, soft Q",
    "control_emergence": "Beyond the paper: weights turn toward θ* for control (SARSA's objective)",
    "control_acting": "Beyond the paper: acting on in-context action values",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _anchor(claim: Claim) -> str:
    return claim.id.replace("_", "-")


def table(claims: list[Claim]) -> list[str]:
    """The summary table: claim, verdict, the first number behind it, a link to its section."""
    lines = ["| claim | verdict | the numbers (first line) |", "|---|---|---|"]
    for c in claims:
        lines.append(
            f"| [{TITLES.get(c.id, c.id)}](#{_anchor(c)}) | **{_cell(c.verdict)}** | "
            f"{_cell(c.numbers[0]) if c.numbers else '–'} |"
        )
    return lines


def write_claims(claims: list[Claim], budget: Budget, out_dir: Path) -> Path:
    lines = [
        f"# The paper's claims, re-derived (budget `{budget.name}`)",
        "",
        "Every row below was run by `ictd-interp claims --out DIR --budget " + budget.name + "` on this folder; "
        "re-running the command resumes it. " + RULES,
        "",
        *table(claims),
        "",
    ]
    for c in claims:
        lines += [
            f'<a id="{_anchor(c)}"></a>',
            "",
            f"## {TITLES.get(c.id, c.id)}",
            "",
            f"**Claim.** {c.claim}",
            "",
            f"**What was run.** {c.run}",
            "",
            f"**Rule.** {c.rule}",
            "",
            f"**Verdict: {c.verdict}.**",
            "",
            *[f"- {n}" for n in c.numbers],
            "",
        ]
        if c.figure and (out_dir / "figures" / f"{c.figure}.png").exists():
            lines += [f"![{c.id}](figures/{c.figure}.png)", ""]
    path = out_dir / "claims.md"
    path.write_text("\n".join(lines))
    (out_dir / "claims.json").write_text(
        json.dumps(
            {"budget": budget.to_dict(), "rules": RULES, "claims": [c.to_dict() for c in claims]}, indent=1, default=str
        )
    )
    return path
