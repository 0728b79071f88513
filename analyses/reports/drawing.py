"""A report's figures, drawn from its typed ``Summary`` only (the saved numbers, never a live model)."""

from __future__ import annotations

from analyses.figures import circuits, plots
from analyses.reports.schema import Summary
from ictd_interp.models.construction import SIGNATURE_TEXT

STAR = "$\\theta^*$"


def draw(summary: Summary) -> dict[str, plots.Figure]:
    """Every figure of the report, by file name."""
    own = {"stylised": _stylised, "standard": _standard, "linear-ictd": _linear}[summary.architecture]
    return {**_common(summary), **own(summary)}


def _common(summary: Summary) -> dict[str, plots.Figure]:
    ex, conv, ext = summary.example, summary.convergence, summary.algorithm.extrapolation
    out = {"error_vs_context": plots.error_vs_context(conv.context_lengths, conv.context),
           "predicted_vs_true": plots.predicted_vs_true(ex["predicted"], ex["true"])}
    if ext is not None:
        reference = STAR if ext.reference_name == "theta*" else ext.reference_name
        out["depth_extrapolation"] = plots.depth_extrapolation(ext.depths, ext.model, ext.reference,
                                                               ext.trained_depth, ext.verdict, reference=reference)
    return out


def _stylised(summary: Summary) -> dict[str, plots.Figure]:
    ex, conv, tied = summary.example, summary.convergence, summary.model_config["tied"]
    out = {
        "attention": plots.attention_comparison({"trained, layer 0": ex["pattern_model"],
                                                 f"{STAR}, layer 0": ex["pattern_theta_star"]}),
        "grouped_kernel": plots.grouped_kernel(ex["grouped_kernel"], "grouped kernel $\\hat M_n$ (model, layer 0)"),
        "signature": plots.signature_bars(summary.metrics.signature, tied=tied),
        "error_vs_depth": plots.error_vs_depth(
            {"theta*": conv.depth["theta_star"], "trained model": conv.depth["model"]},
            {"theta*": conv.theta_star_fit}, conv.one_minus_C),
    }
    if summary.curves:
        c = summary.curves
        out["diagonality_over_training"] = plots.diagonality_curve(c["step"], c["kernel_diagonality_mean"],
                                                                   summary.gamma, c.get("kernel_diagonality_heads"),
                                                                   summary.diagonality.theta_star)
        out["cosine_over_training"] = plots.cosine_curves(c["step"], c["cos_A"], c["cos_V"], tied=tied)
    return out


def _standard(summary: Summary) -> dict[str, plots.Figure]:
    ex, conv, circuit = summary.example, summary.convergence, summary.circuit
    layer, head = ex["best_head"]
    out = {
        "error_vs_depth": circuits.probe_error_vs_depth({
            "model, probe of its own output": conv.depth_msve["model"],
            "model, probe of $v_\\pi$": conv.depth_msve["model_v_pi_probe"],
            "theta*, stored value row": conv.depth_msve["theta_star"]}),
        "td_quantities": circuits.probe_map(circuit.quantity_r2, "Where do TD's quantities live? (model)"),
        "td_quantities_theta_star": circuits.probe_map(circuit.theta_star_quantity_r2, f"The same probes on {STAR}"),
        "head_td_kernel": circuits.head_map(circuit.heads, "td_kernel_correlation",
                                            "Which heads attend like the softmax-TD kernel?",
                                            f"correlation with {STAR}'s pattern"),
        "head_signature": circuits.probed_signature_bars(
            circuit.signatures, f"Direct effect of each head on the probed value ({STAR}: {SIGNATURE_TEXT[1:-1]})"),
        "layer_signature": circuits.probed_signature_bars(
            circuit.layer_signatures, f"Each layer's update of the probed value ({STAR}: {SIGNATURE_TEXT[1:-1]})"),
        "attention": plots.attention_comparison({f"model, layer {layer} head "
                                                 f"{head} (most TD-like)": ex["pattern_model"],
                                                 f"{STAR}, layer 0": ex["pattern_theta_star"]}),
    }
    if summary.curves:
        c = summary.curves
        final_heads = [[h["diagonality"] for h in circuit.heads if h["layer"] == l]
                       for l in range(summary.model_config["n_layers"])]
        out["diagonality_over_training"] = plots.diagonality_curve(c["step"], c["kernel_diagonality_mean"],
                                                                   summary.gamma, c.get("kernel_diagonality_heads"),
                                                                   summary.diagonality.theta_star, final_heads)
    return out


def _linear(summary: Summary) -> dict[str, plots.Figure]:
    w, conv = summary.linear.weights, summary.convergence
    return {
        "weights_vs_td0": plots.linear_weights(
            w["P"][0], w["Q"][0], w["P_td0"], w["Q_td0"], summary.model_config["d_features"]
        ),
        "error_vs_depth": plots.error_vs_depth(
            {
                "TD(0) construction (linear, C = I)": conv.depth["td0"],
                "theta* (softmax, same depth)": conv.depth["theta_star"],
                "trained model": conv.depth["model"],
            },
            {},
            None,
        ),
    }
