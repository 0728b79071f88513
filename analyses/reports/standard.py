"""``analyze`` for a standard-architecture model: find the TD circuit without being told where it is.

Nothing in a standard model is pinned, so the weight probes against θ* do not apply; everything here
is in function space and goes through the protocol both model classes share (docs/theory.md §10):
value probes per site (error vs depth), TD-quantity probes, per-head kernels and signatures, the
TD-family identification of the probed per-layer values, and the same error-vs-context,
best-in-family and (tied models) depth-extrapolation answers as the stylised report.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cached_property
from typing import Any, NamedTuple, Optional

import torch

from ictd_interp.analyses.figures import circuits, plots
from ictd_interp.analyses.figures.style import STAR, Figure
from ictd_interp.analyses.metrics import baselines, in_context
from ictd_interp.analyses.metrics.algorithm_id import identify_from_values
from ictd_interp.analyses.metrics.convergence import CONTEXT_LENGTHS, errors_by_context, sup_error
from ictd_interp.analyses.metrics.diagonality import kernel_diagonality_mean
from ictd_interp.analyses.metrics.draws import draw_seed
from ictd_interp.analyses.metrics.extrapolation import depth_extrapolation
from ictd_interp.analyses.metrics.heads import (
    HeadKernel,
    head_kernels,
    most_like,
    probed_layer_signatures,
    probed_signatures,
)
from ictd_interp.analyses.metrics.site_probes import (
    LinearProbes,
    probe_errors_by_depth,
    probed_values,
    quantity_probes,
    quantity_r2,
    residual_stack,
    value_probes,
)
from ictd_interp.analyses.reports.standard_words import standard_sentences
from ictd_interp.analyses.reports.summary_md import answer_lines, baseline_table, ladder_lines, summary_header
from ictd_interp.analyses.summary.sections import DepthCurves, Summary
from ictd_interp.analyses.summary.store import build
from ictd_interp.config.train import TrainConfig
from ictd_interp.io.progress import computed
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.hook_names import ends_with
from ictd_interp.models.registry import HookedModel
from ictd_interp.models.stylised.theta_star import SIGNATURE_TEXT
from ictd_interp.tasks.sampling import sample_from
from ictd_interp.training.evaluation import EvalSet, evaluate

ARCHITECTURE = "standard"  # the architecture of this report (found by ictd_interp.analyses.analyze)
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
    model: HookedModel,
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
    run = _Run(model, star, config, tasks)
    with torch.no_grad():
        values, star_values = model(tasks.prompt), star(tasks.prompt)
    sections = computed(
        {
            "metrics": lambda: evaluate(model, eval_set).to_dict(),
            "baselines": lambda: baselines.compare(
                values, tasks, config.tasks.gamma, model.cfg.n_layers, extra={"theta_star": star_values}
            ),
            "diagonality": lambda: {"theta_star": kernel_diagonality_mean(star, tasks)[0, 0].item()},
            "convergence": run.convergence,
            "circuit": run.circuit,
            "algorithm": run.algorithm,
            "in_context": lambda: in_context.assess(
                model, tasks, out["baselines"], out["algorithm"]["layers"][-1], config.tasks, config.eval_seed
            ),
            "example": lambda: _example(model, star, tasks, run.kernels),
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


class _Run:
    """The sections of a standard report that share fitted probes and head kernels (each fitted once, on first
    use): probes on ``PROBE_FIT_TASKS`` other tasks, signatures and fits on the first ``SIGNATURE_TASKS``."""

    def __init__(self, model: HookedModel, star: HookedICTDTransformer, config: TrainConfig, tasks) -> None:
        self.model, self.star, self.config, self.tasks = model, star, config, tasks
        self.fit = sample_from(config.tasks, PROBE_FIT_TASKS, seed=draw_seed(config.eval_seed, "probe_fit"))
        self.few = tasks[:SIGNATURE_TASKS]
        self.lengths = [n for n in CONTEXT_LENGTHS if not model.cfg.pos_embed or n < model.cfg.n_ctx]

    @cached_property
    def probes(self) -> Probes:
        model, fit = self.model, self.fit
        return Probes(
            value_probes(model, fit, "output"),
            value_probes(model, fit, "v_pi"),
            quantity_probes(model, fit),
            quantity_probes(self.star, fit),
        )

    @cached_property
    def kernels(self) -> list[HeadKernel]:
        return head_kernels(self.model, self.tasks)

    def convergence(self) -> dict[str, Any]:
        """MSVE per site (this report) and, as the stylised report's depth curve, the sup error; error versus
        context on 64 longer trajectories."""
        model, star, tasks, lengths = self.model, self.star, self.tasks, self.lengths
        star_rows = residual_stack(star, tasks.prompt)[..., star.layout.current]
        long_tasks = sample_from(
            self.config.tasks, 64, seed=draw_seed(self.config.eval_seed, "long_context"), length=max(lengths)
        )
        output = self.probes.output
        return {
            "depth_msve": DepthCurves(
                model=probe_errors_by_depth(model, output, tasks),
                theta_star=(star_rows - tasks.v_true).pow(2).mean((1, 2)).tolist(),
                model_v_pi_probe=probe_errors_by_depth(model, self.probes.v_pi, tasks),
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

    def circuit(self) -> dict[str, Any]:
        p, model, few = self.probes, self.model, self.few
        return {
            "quantity_r2": quantity_r2(model, p.quantity, self.tasks),
            "theta_star_quantity_r2": quantity_r2(self.star, p.star_quantity, self.tasks),
            "heads": self.kernels,
            "signatures": probed_signatures(model, few, p.quantity, p.output),
            "layer_signatures": probed_layer_signatures(model, few, p.quantity, p.output),
            **most_like(self.kernels),
        }

    def algorithm(self) -> dict[str, Any]:
        probed = probed_values(self.model, self.probes.output, self.few)
        layers = identify_from_values(probed, self.few)
        tabular = identify_from_values(probed, self.few, kernel="tabular")
        extrapolation = None
        if self.model.cfg.tied:
            extrapolation = depth_extrapolation(self.model, self.star, self.tasks, factor=STANDARD_EXTRAPOLATION)
        return {"layers": layers, "layers_tabular": tabular, "extrapolation": extrapolation}


@torch.no_grad()
def _example(model: HookedModel, star: HookedICTDTransformer, tasks, kernels: list[HeadKernel]) -> dict[str, Any]:
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


# ---- words (summary.md; the verdict and its sentences in reports.standard_words) -------------------------


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
        *ladder_lines(summary.in_context),
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


def figures(summary: Summary) -> dict[str, Figure]:
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
