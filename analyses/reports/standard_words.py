"""The words of a standard model's summary.md: which heads look like TD's, the verdict on its circuit and the
sentences behind it (``reports.standard.lines`` puts them in order)."""

from __future__ import annotations

from ictd_interp.analyses.metrics.algorithm_id import MAX_CONDITION
from ictd_interp.analyses.metrics.heads import HeadKernel, Signature
from ictd_interp.analyses.reports.summary_md import layer_sentence
from ictd_interp.analyses.summary.sections import Algorithm, Circuit, Summary
from ictd_interp.models.stylised.theta_star import SIGNATURE_TEXT

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
