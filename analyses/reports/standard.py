"""``analyze`` for a standard-architecture model: find the TD circuit without being told where it is.

Nothing in a standard model is pinned, so the weight probes against θ* do not apply; everything here
is in function space and goes through the protocol both model classes share (docs/theory.md §10):
value probes per site (error vs depth), TD-quantity probes, per-head kernels and signatures, the
TD-family identification of the probed per-layer values, and the same error-vs-context,
best-in-family and (tied models) depth-extrapolation answers as the stylised report.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any, NamedTuple, Optional

import torch

from analyses.figures import circuits, plots
from analyses.figures.plots import STAR
from analyses.metrics import baselines, in_context
from analyses.metrics.algorithm_id import MAX_CONDITION, identify_from_values
from analyses.metrics.convergence import CONTEXT_LENGTHS, errors_by_context, sup_error
from analyses.metrics.diagonality import kernel_diagonality_mean
from analyses.metrics.extrapolation import depth_extrapolation
from analyses.metrics.heads import (
    HeadKernel,
    Signature,
    head_kernels,
    most_like,
    probed_layer_signatures,
    probed_signatures,
)
from analyses.metrics.site_probes import (
    LinearProbes,
    probe_errors_by_depth,
    probed_values,
    quantity_probes,
    quantity_r2,
    residual_stack,
    value_probes,
)
from analyses.reports.summary_md import answer_lines, baseline_table, layer_sentence, summary_header
from analyses.summary.sections import Algorithm, Circuit, DepthCurves, Summary
from analyses.summary.store import build
from ictd_interp.config.train import TrainConfig
from ictd_interp.io.progress import computed
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.architectures.hook_names import ends_with
from ictd_interp.models.constructions.theta_star import SIGNATURE_TEXT
from ictd_interp.models.registry import ICTDModel
from ictd_interp.tasks.sampling import sample_from
from ictd_interp.training.evaluation import EvalSet, evaluate

ARCHITECTURE = "standard"  # the architecture of this report (found by analyses.analyze)
# A tied standard block has no linear map to read a spectrum from: its error curve runs to 32x its depth
STANDARD_EXTRAPOLATION = 32
PROBE_FIT_TASKS, SIGNATURE_TASKS = 256, 64  # probes fitted on other tasks; signatures and fits on the first 64


class Probes(NamedTuple):
    """The probes a standard report fits once: of the model's own output and of ``v_pi`` at every site, and of
    each TD quantity (on the model and on θ*)."""

    output: LinearProbes
    v_pi: LinearProbes
    quantity: dict[str, LinearProbes]
    star_quantity: dict[str, LinearProbes]


def compute(
    model: ICTDModel,
    config: TrainConfig,
    source: str,
    curves: Optional[dict[str, list]],
    metadata: Optional[dict[str, Any]] = None,
    neu: bool = True,
) -> Summary:
    """Every number of the report of a standard model, as a typed ``Summary`` (``metadata`` and ``neu`` are
    the other reports' options: population NEU needs the stylised model's exact per-task updates)."""
    eval_set = EvalSet.build(replace(config, device="cpu"))
    model = model.to("cpu")
    tasks, star = eval_set.tasks, HookedICTDTransformer.from_theta_star(model.cfg)
    fit, few = sample_from(config.tasks, PROBE_FIT_TASKS, seed=config.eval_seed + 2), tasks[:SIGNATURE_TASKS]
    lengths = [n for n in CONTEXT_LENGTHS if not model.cfg.pos_embed or n < model.cfg.n_ctx]
    with torch.no_grad():
        values, star_values = model(tasks.prompt), star(tasks.prompt)

    @cache  # fitted once, on first use by a section
    def probes() -> Probes:
        return Probes(
            value_probes(model, fit, "output"),
            value_probes(model, fit, "v_pi"),
            quantity_probes(model, fit),
            quantity_probes(star, fit),
        )

    @cache
    def kernels() -> list[HeadKernel]:
        return head_kernels(model, tasks)

    def convergence() -> dict[str, Any]:
        star_rows = residual_stack(star, tasks.prompt)[..., star.layout.current]
        long_tasks = sample_from(config.tasks, 64, seed=config.eval_seed + 1, length=max(lengths))
        output = probes().output
        return {  # MSVE per site (this report) and, as the stylised report's depth curve, the sup error
            "depth_msve": DepthCurves(
                model=probe_errors_by_depth(model, output, tasks),
                theta_star=(star_rows - tasks.v_true).pow(2).mean((1, 2)).tolist(),
                model_v_pi_probe=probe_errors_by_depth(model, probes().v_pi, tasks),
            ),
            "depth": DepthCurves(
                model=[sup_error(v, tasks).mean().item() for v in probed_values(model, output, tasks)],
                theta_star=[sup_error(v, tasks).mean().item() for v in star_rows],
            ),
            "context_lengths": lengths,
            "context": {
                name: errors_by_context(m, long_tasks, lengths).mean(-1).tolist()
                for name, m in (("trained model", model), ("theta* (same depth)", star))
            },
        }

    def circuit() -> dict[str, Any]:
        p = probes()
        return {
            "quantity_r2": quantity_r2(model, p.quantity, tasks),
            "theta_star_quantity_r2": quantity_r2(star, p.star_quantity, tasks),
            "heads": kernels(),
            "signatures": probed_signatures(model, few, p.quantity, p.output),
            "layer_signatures": probed_layer_signatures(model, few, p.quantity, p.output),
            **most_like(kernels()),
        }

    def algorithm() -> dict[str, Any]:
        probed = probed_values(model, probes().output, few)
        return {
            "layers": identify_from_values(probed, few),
            "layers_tabular": identify_from_values(probed, few, kernel="tabular"),
            "extrapolation": depth_extrapolation(model, star, tasks, factor=STANDARD_EXTRAPOLATION)
            if model.cfg.tied
            else None,
        }

    sections = computed(
        {
            "metrics": lambda: evaluate(model, eval_set).to_dict(),
            "baselines": lambda: baselines.compare(
                values, tasks, config.tasks.gamma, model.cfg.n_layers, extra={"theta_star": star_values}
            ),
            "diagonality": lambda: {"theta_star": kernel_diagonality_mean(star, tasks)[0, 0].item()},
            "convergence": convergence,
            "circuit": circuit,
            "algorithm": algorithm,
            "in_context": lambda: in_context.assess(
                model, tasks, out["baselines"], out["algorithm"]["layers"][-1], config.tasks.gamma
            ),
            "example": lambda: _example(model, star, tasks, kernels()),
        },
        desc="analyze",
        into=(out := {}),
    )
    return build(
        Summary,
        {
            **summary_header(source, config, model, len(tasks), curves),
            **sections,
        },
    )


@torch.no_grad()
def _example(model: ICTDModel, star: HookedICTDTransformer, tasks, kernels: list[HeadKernel]) -> dict[str, Any]:
    best = max(kernels, key=lambda r: r.td_kernel_correlation)
    _, mine = model.run_with_cache(tasks.prompt[:1], names_filter=ends_with("hook_pattern"))
    _, ref = star.run_with_cache(tasks.prompt[:1], names_filter=ends_with("hook_pattern"))
    return {
        "best_head": [best.layer, best.head],
        "pattern_model": mine["pattern", best.layer][0, best.head].tolist(),
        "pattern_theta_star": ref["pattern", 0][0, 0].tolist(),
        "predicted": {"model": model(tasks.prompt)[:, -1].tolist(), "theta_star": star(tasks.prompt)[:, -1].tolist()},
        "true": tasks.v_true[:, -1].tolist(),
    }


# ---- words (summary.md) ----------------------------------------------------------------------------------


TD_LIKE_CORRELATION = 0.5  # a head whose pattern correlates at least this much with the TD kernel


PRESENT_R2 = 0.5  # a quantity is "linearly present" at a site when its held-out R² reaches this


def td_heads(circuit: Circuit) -> list[tuple[HeadKernel, Signature]]:
    """Heads whose pattern correlates with the TD kernel at least ``TD_LIKE_CORRELATION``, each with its
    signature (and whether it is TD's (+, +, −))."""
    signatures = {(r.layer, r.head): r for r in circuit.signatures}
    return [(h, signatures[(h.layer, h.head)]) for h in circuit.heads if h.td_kernel_correlation >= TD_LIKE_CORRELATION]


def verdict(circuit: Circuit, algorithm: Algorithm) -> str:
    """One sentence: does this model implement in-context TD, where, how close to θ*'s algorithm? A
    TD-like head counts as signed when its own output or its layer's whole update (through the MLP)
    moves the probed value with TD's (+, +, −) signs."""
    heads = td_heads(circuit)
    layer_td = {r.layer for r in circuit.layer_signatures or [] if r.matches_td}
    signed = [h for h, sig in heads if sig.matches_td or h.layer in layer_td]
    in_family = [r for r in algorithm.layers if r.in_family]
    where = ", ".join(f"layer {h.layer} head {h.head}" for h in signed)
    if signed and in_family:
        return (
            f"Yes, in part: {where} attend{'s' if len(signed) == 1 else ''} like the softmax-TD kernel and "
            f"move{'s' if len(signed) == 1 else ''} the value with TD's {SIGNATURE_TEXT} signs, and "
            f"{len(in_family)} of {len(algorithm.layers)} layers' probed updates are "
            "explained by the TD family."
        )
    if heads:
        tabular = lambda h: h.tabular_kernel_correlation or 0.0  # noqa: E731
        best = max((h for h, _ in heads), key=lambda h: max(h.td_kernel_correlation, tabular(h)))
        kernel = (
            f"layer {best.layer} head {best.head} attends like the softmax-TD kernel (correlation "
            f"{best.td_kernel_correlation:.2f})"
        )
        if tabular(best) > best.td_kernel_correlation:
            kernel = (
                f"layer {best.layer} head {best.head} attends to the sources in the target's own state "
                f"(correlation {tabular(best):.2f} with the tabular kernel, "
                f"{best.td_kernel_correlation:.2f} with θ*'s softmax kernel): per-state averaging, the kernel "
                "tabular TD and every-visit Monte-Carlo share"
            )
        fits = algorithm.layers + (algorithm.layers_tabular or [])
        fve = max((r.fve for r in fits), default=float("nan"))
        return (
            f"Partly: {kernel}, but "
            + (_unsigned(circuit) if not signed else "no layer's probed update is in the TD family")
            + "; the TD family (softmax or tabular kernel) explains "
            f"at most {fve:.0%} of any layer's probed update."
        )
    return (
        "No TD circuit found: no head's pattern correlates with the softmax-TD kernel at "
        f"≥ {TD_LIKE_CORRELATION}; the model predicts values some other way."
    )


# A standard model without positional embeddings is equivariant to any reordering of its context's columns
# (tests/unit/test_standard.py): it cannot tell which state follows which, so no update of it can bootstrap on
# v(S_{j+1}).
UNORDERED = (
    "**It cannot see the order of its context:** with no positional embedding (`pos_embed = false`) and no "
    "temporal shift, reordering the context's columns reorders its outputs and nothing else, so it never "
    "observes which state follows which. TD's bootstrap on v(S_{j+1}) is out of its reach by construction: "
    "the `v_next` probe below reads what S_j and the unordered context predict of v(S_{j+1}), and the TD "
    "error under v_π has mean 0 given S_j within a task. Train with `--pos-embed` for a model that "
    "can see transitions."
)


def _unsigned(circuit: Circuit) -> str:
    """No TD-like head moves the value with TD's signs, nor its layer: said with the layers that do (holding no
    TD-like head) and those whose signs cannot be read (nearly dependent probes make them n/a)."""
    layers = circuit.layer_signatures or []
    holding = sorted({h.layer for h, _ in td_heads(circuit)})
    others = [r.layer for r in layers if r.matches_td]
    unread = [r.layer for r in layers if None in r.normalised]
    text = (
        f"no TD-like head ({_layers(holding)}), nor its layer's whole update, moves the value with TD's "
        f"{SIGNATURE_TEXT} signs where they can be read"
    )
    if others:
        text += (
            f"; the whole update of {_layers(others)} has TD's signs, with no TD-like head in "
            f"{'it' if len(others) == 1 else 'them'}"
        )
    if unread:
        text += (
            f"; at {_layers(unread)} the signs cannot be read (the probes of the reward, next and current "
            "value are nearly dependent there)"
        )
    return text


def _layers(ids: list[int]) -> str:
    return ("layer " if len(ids) == 1 else "layers ") + ", ".join(str(i) for i in ids)


def _td_words(sig: Signature) -> str:
    return (
        " — TD's signs."
        if sig.matches_td
        else " — signs not readable."
        if None in sig.normalised
        else " — not TD's signs."
    )


def _signs(normalised: list) -> str:
    text = ", ".join("n/a" if v is None else f"{v:+.2f}" for v in normalised)
    return text + (
        f" (n/a: the three probe directions have condition number above {MAX_CONDITION:g}, so no "
        "perturbation moves one probe's reading alone)"
        if None in normalised
        else ""
    )


def standard_sentences(summary: Summary) -> list[str]:
    """The answers of ``summary.md`` for a standard model, in words."""
    conv, circuit, alg, gamma = summary.convergence, summary.circuit, summary.algorithm, summary.gamma
    depth = summary.model.n_layers
    lines = [
        f"- **Verdict.** {verdict(circuit, alg)}" + ("" if summary.model.pos_embed else " " + UNORDERED),
        f"- **Error (at its {depth} layers).** " + summary.baselines.sentence,
        "- **Where the value lives.** The probed value's MSVE per site (embedding, then after each block): "
        + ", ".join(f"{e:.3f}" for e in conv.depth_msve.model)
        + " (θ*'s stored row: "
        + ", ".join(f"{e:.3f}" for e in conv.depth_msve.theta_star)
        + ").",
    ]
    for name, r2 in circuit.quantity_r2.items():
        present = [i for i, v in enumerate(r2) if v >= PRESENT_R2]
        lines.append(
            f"- `{name}`: held-out R² per site "
            + ", ".join(f"{v:.2f}" for v in r2)
            + (f"; linearly present from site {present[0]} on." if present else "; never linearly present.")
        )
    for h, sig in td_heads(circuit):
        lines.append(
            f"- Layer {h.layer} head {h.head}: correlation {h.td_kernel_correlation:.2f} with θ*'s "
            f"softmax-TD kernel and {h.tabular_kernel_correlation:.2f} with the tabular same-state kernel, "
            f"diagonality {h.diagonality:.2f}, signature (reward, next, current) = "
            + _signs(sig.normalised)
            + _td_words(sig)
        )
    for r in circuit.layer_signatures:
        lines.append(
            f"- Layer {r.layer}'s whole update of the probed value (attention, MLP, residual): "
            "(reward, next, current) = " + _signs(r.normalised) + _td_words(r)
        )
    lines += ["- " + layer_sentence(row, gamma).replace("Layer", "Probed layer", 1) for row in alg.layers]
    lines.append(
        "- With the tabular (same-state) kernel in place of the softmax family, the TD family explains "
        + ", ".join(f"{r.fve:.0%}" for r in alg.layers_tabular)
        + " of the probed updates of layers "
        + ", ".join(str(r.layer) for r in alg.layers_tabular)
        + "."
    )
    ext = alg.extrapolation
    if ext:
        lines.append(
            f"- **Iterated beyond its trained depth** the tied block {ext.verdict} (MSVE {ext.model[-1]:.3g} "
            f"at depth {ext.depths[-1]}; θ* {ext.reference[-1]:.3g})."
        )
    return lines


def lines(summary: Summary) -> list[str]:
    cfg, m = summary.model, summary.metrics
    return [
        f"# ICTD analysis of `{summary.source}` (standard architecture)",
        "",
        f"Model: pre-LN transformer, {cfg.n_layers} layers, d_model={cfg.d_model}, {cfg.n_heads} heads, "
        f"MLP width {cfg.d_mlp}, LayerNorm {'on' if cfg.layer_norm else 'off'}, "
        f"{'tied' if cfg.tied else 'per-layer'} weights. Every number below is on {summary.eval_tasks}, "
        f"except where a line says otherwise: probes are fitted on {PROBE_FIT_TASKS} other tasks, and the head and "
        f"layer signatures and the TD-family fits of the probed updates use the first {SIGNATURE_TASKS} evaluation "
        "tasks.",
        "",
        *answer_lines(summary.in_context),
        "## Does it implement in-context TD, where, and how close to θ*?",
        "",
        *standard_sentences(summary),
        "",
        *baseline_table(summary.baselines),
        "",
        f"Eval MSVE {m.eval_msve:.4f} (θ* at the same depth {m.theta_star_msve:.4f}); kernel diagonality "
        f"{m.kernel_diagonality_mean:.3f} averaged over all {summary.model.n_layers * summary.model.n_heads} heads "
        f"(one head per line above gives its own), θ* {summary.diagonality.theta_star:.3f} on the same tasks. Probes "
        "read linear structure only: a quantity a model keeps non-linearly shows as absent.",
        "",
    ]


# ---- figures -------------------------------------------------------------------------------------------------


def figures(summary: Summary) -> dict[str, plots.Figure]:
    ex, conv, circuit = summary.example, summary.convergence, summary.circuit
    layer, head = ex.best_head
    out = {
        "error_vs_depth": circuits.probe_error_vs_depth(
            {
                "model, probe of its own output": conv.depth_msve.model,
                "model, probe of $v_\\pi$": conv.depth_msve.model_v_pi_probe,
                "theta*, stored value row": conv.depth_msve.theta_star,
            }
        ),
        "td_quantities": circuits.probe_map(circuit.quantity_r2, "Where do TD's quantities live? (model)"),
        "td_quantities_theta_star": circuits.probe_map(circuit.theta_star_quantity_r2, f"The same probes on {STAR}"),
        "head_td_kernel": circuits.head_map(
            circuit.heads,
            "td_kernel_correlation",
            "Which heads attend like the softmax-TD kernel?",
            f"correlation with {STAR}'s pattern",
        ),
        "head_signature": circuits.probed_signature_bars(
            circuit.signatures, f"Direct effect of each head on the probed value ({STAR}: {SIGNATURE_TEXT[1:-1]})"
        ),
        "layer_signature": circuits.probed_signature_bars(
            circuit.layer_signatures, f"Each layer's update of the probed value ({STAR}: {SIGNATURE_TEXT[1:-1]})"
        ),
        "attention": plots.attention_comparison(
            {
                f"model, layer {layer} head {head} (most TD-like)": ex.pattern_model,
                f"{STAR}, layer 0": ex.pattern_theta_star,
            }
        ),
    }
    if summary.curves:
        c = summary.curves
        final_heads = [[h.diagonality for h in circuit.heads if h.layer == l] for l in range(summary.model.n_layers)]
        out["diagonality_over_training"] = plots.diagonality_curve(
            c.step,
            c.kernel_diagonality_mean,
            summary.gamma,
            c.kernel_diagonality_heads,
            summary.diagonality.theta_star,
            final_heads,
        )
    return out
