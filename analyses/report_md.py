"""``summary.md``: a short readable report that links the figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _fmt(values) -> str:
    return ", ".join("n/a" if v is None else f"{v:+.2f}" for v in values)


def write_markdown(summary: dict[str, Any], out_dir: Path) -> Path:
    m, p, cfg = summary["metrics"], summary["probes"], summary["model_config"]
    diag, margin, conv = summary["diagonality"], summary["margin"], summary["convergence"]
    lines = [
        f"# ICTD analysis of `{summary['source']}`",
        "",
        f"Model: {cfg['form']} form, {cfg['attention']} attention, {cfg['n_layers']} layers, d={cfg['d_features']}, "
        f"{'tied' if cfg['tied'] else 'per-layer'} weights, {cfg['mask']} mask. Evaluated on {summary['n_eval_tasks']} "
        f"held-out Boyan tasks (n={summary['config']['context_len']}, s={summary['config']['n_states']}).",
        "",
        "## Does it implement softmax-weighted TD?",
        "",
        "| metric | value |",
        "|---|---|",
        f"| eval MSVE (model / theta*) | {m['eval_msve']:.4f} / {m['theta_star_msve']:.4f} |",
        f"| cos(A, A*) per layer | {', '.join(f'{c:.3f}' for c in m['cos_A'])} |",
        f"| cos(V, V*) per layer (identifiable entries) | {', '.join(f'{c:.3f}' for c in m['cos_V'])} |",
        f"| sign match (+, +, -) per layer | {', '.join('yes' if s else 'no' for s in m['signature_match'])} |",
        f"| prediction gap to theta* (RMS) | {p['rms_gap_to_theta_star']:.4f} |",
        f"| sensitivity cosine d v/d x(S_n) | {p['sensitivity_cosine']:.3f} |",
        f"| kernel diagonality (model mean / theta*) | {m['kernel_diagonality_mean']:.3f} / {diag['theta_star']:.3f}"
        f" (threshold (1+gamma)/2 = {diag['threshold']:.3f}) |",
        f"| Assumption 5.1 margin C (model / theta*) | {margin['model_mean']:+.4f} / {margin['theta_star_mean']:+.4f} |",
        f"| theta* geometric rate (fit) vs 1 - C | {conv['theta_star_fit']['rate']:.3f} vs {conv['one_minus_C']:.3f} |",
        "",
        "Value-row signature (reward, target, current), normalised; n/a = not identifiable at that layer:",
        "",
        *[f"- layer {l}: {_fmt(s)}" for l, s in enumerate(m["signature"])],
        "",
        "Fitted TD algorithm per layer (theta* gives alpha = 1, beta = 1, gamma = the task's):",
        "",
        *[f"- layer {r['layer']}: alpha={r['alpha']:.3f}, beta={r['beta']:.3f}, gamma="
          f"{'n/a' if r['gamma'] is None else format(r['gamma'], '.3f')}, variance explained {r['fve']:.3f}"
          for r in summary["algorithm_fit"]],
        "",
        "## Figures",
        "",
    ]
    for name in sorted(p.stem for p in (out_dir / "figures").glob("*.png")):
        lines += [f"### {name.replace('_', ' ')}", "", f"![{name}](figures/{name}.png)", ""]
    path = out_dir / "summary.md"
    path.write_text("\n".join(lines))
    return path
