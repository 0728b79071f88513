"""Readings of a checkpoint, each a classifier of "runs TD" with a rule a researcher applies to one checkpoint.

A reading turns a stylised model (and held-out contexts, never their true values unless it is a probe fitted on
them) into one **score**, oriented so that higher reads more as TD, and a **rule**: the checkpoint reads as TD iff
``score >= threshold``. Nothing here looks at the verdict ladder's errors: the labels come from function space
(``population.label``), the readings from the weights and activations. A reading that cannot be made on a
checkpoint (a layer whose discount is not identifiable, a map with no limit) scores ``None``: it does not read as
TD, and ranks below every score in the AUROC (``scores``).

The card's readings (what the design card asks a report to show):

* ``cos_V``, ``cos_A``: the lowest layer's cosine of ``V`` / ``A`` with θ*'s over identifiable entries; rule 0.99.
* ``signature``: 1 when every layer's value row has θ*'s signs (+, +, −) on (reward, next, current), else 0.
* ``diagonality``: the attention mass a target puts on sources in its own state, mean over layers and tasks,
  minus θ*'s on the same tasks; rule: at least θ*'s.

The toolkit's own (docs/theory.md §7, §8):

* ``discount``: ``−|b/(−c) − γ|`` of the last layer, read exactly from its weights; rule: within 0.02 of γ.
* ``depth_limit``: the learned layer run to depth → ∞, computed from its weights (``depth_limit``), against the
  context's TD fixed point (CE): ``−|MSVE(limit) / MSVE(CE) − 1|`` on held-out contexts of ``LONG`` transitions,
  where a discount off γ shows (CE's own error is small there); rule: within the ladder's ``CE_MARGIN`` (50%) of CE.
  ``None`` when the map has no limit on some context.
* ``spectral_radius``: ``1 − ρ``, ρ the largest spectral radius over contexts of the last layer's map on state
  values; rule ``ρ ≤ 0.999`` (the layer contracts, as TD's update does).
* ``algorithm``: 1 when the last layer reads as a member of the softmax-TD family (an isotropic kernel,
  ``cos(A_ff, I) ≥ 0.95``, identifiable coefficients, ``b > 0 > c``) with its discount within γ ± 0.1, else 0.
* ``td_profile``: ``−max_l e_l``, the worst layer of the profile of the value activations against softmax TD run with
  the model's own kernel and step (``td_profile``); rule: every layer within 10% (RMS) of TD's iterates.

The field's (what a researcher would run without this toolkit):

* ``probe_td_error``: held-out R² of a linear probe for the TD error ``R + γ v(S') − v(S)`` of each context
  column at the last layer's output, fitted on other contexts (``site_probes``); rule: R² ≥ 0.5.
* ``probe_next_value``: the same for ``v(S')``, the value TD bootstraps from (γ v(S') up to the known γ).
* ``patching_value``, ``das_value``: TD's value variable, causally (``interchange``). The high-level causal model
  is θ* at the checkpoint's depth and discount (the paper's TD algorithm), its variable the value estimate of every
  column after the middle layer (``causal_site``: ``resid_post`` of layer ``L // 2 − 1``; with it γ v(S′), the next
  column's). Pairs: each task the base, the next its source. θ*'s **effect** on a pair is its query prediction with
  that row taken from the source, minus its own (``causal_targets``). Activation patching moves the checkpoint's own
  value row (where the architecture keeps the estimate) from the source run; DAS moves a learned axis (``fit_das``
  on the fit contexts to the targets, the better of ``DAS_SEEDS``' runs). Score: the move's interchange accuracy on
  the effect (``effect_iia``): 1 when it does to the checkpoint what the swap does to θ*, 0 when it does nothing (an
  accuracy on the predictions themselves would credit a move that does nothing with the share of their variance the
  base task explains, 0.9 and more here). Rule: ≥ 0.9. ``None`` for one layer.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.analyses.metrics.algorithm_id import ISOTROPIC, read_layer
from ictd_interp.analyses.metrics.baselines import error_parts
from ictd_interp.analyses.metrics.depth_limit import limit_spectrum
from ictd_interp.analyses.metrics.diagonality import kernel_diagonality_mean
from ictd_interp.analyses.metrics.in_context import DISCOUNT_BAND
from ictd_interp.analyses.metrics.interchange import fit_das, moved_predictions, row_swapped, swap_move
from ictd_interp.analyses.metrics.ladder import CE, CE_MARGIN, ESTIMATORS, LONGER
from ictd_interp.analyses.metrics.site_probes import fit_probes, td_quantities
from ictd_interp.analyses.metrics.td_profile import td_profile
from ictd_interp.models.hook_names import get_act_name
from ictd_interp.models.stylised.model import HookedICTDTransformer
from ictd_interp.reference.metrics import value_signature, weight_cosines
from ictd_interp.tasks.sampling import TaskBatch

DISCOUNT_TOL = 0.02  # "tracks γ": the rule of the discount reading
LIMIT_TOL = CE_MARGIN  # "its limit is CE": the ladder's own margin
COSINE_RULE = 0.99
PROBE_RULE = 0.5
IIA_RULE = 0.9
DAS_STEPS, DAS_SEEDS = 100, (0, 1)  # the track's DAS: two restarts of 100 Adam steps (a 1-D axis in d + 3 dims)
CONTRACTS = 1e-3  # ρ at most 1 − 1e-3
PROFILE_RULE = 0.1  # every layer's value activations within 10% (RMS) of softmax TD's with the learned kernel
LONG = LONGER[-1]  # the depth limit's context length


@dataclass(frozen=True)
class Reading:
    """One reading: ``family`` card | toolkit | field; the checkpoint reads as TD iff ``score >= threshold``."""

    name: str
    family: str
    rule: str
    threshold: float
    score: Callable[[HookedICTDTransformer, "Contexts"], Optional[float]]


@dataclass(frozen=True)
class Contexts:
    """Held-out contexts a reading may use: ``tasks`` to score on, ``fit`` to fit probes on (drawn apart), ``long``
    contexts of ``LONG`` transitions for the depth limit (the ladder's longest ``n``)."""

    tasks: TaskBatch
    fit: TaskBatch
    long: TaskBatch


def cos_v(model: HookedICTDTransformer, ctx: Contexts) -> Optional[float]:
    cos = [c for c in weight_cosines(model, model.cfg)["V"] if c is not None]
    return min(cos) if cos else None


def cos_a(model: HookedICTDTransformer, ctx: Contexts) -> Optional[float]:
    return min(weight_cosines(model, model.cfg)["A"])


def signature(model: HookedICTDTransformer, ctx: Contexts) -> float:
    return float(all(row["matches"] for row in value_signature(model, model.cfg)))


def diagonality(model: HookedICTDTransformer, ctx: Contexts) -> float:
    star = HookedICTDTransformer.from_theta_star(model.cfg).to(model.device)
    return float(kernel_diagonality_mean(model, ctx.tasks).mean() - kernel_diagonality_mean(star, ctx.tasks).mean())


def _last(model: HookedICTDTransformer):
    return read_layer(model, model.cfg.n_layers - 1)


def discount(model: HookedICTDTransformer, ctx: Contexts) -> Optional[float]:
    found = _last(model).effective_discount
    return None if found is None else -abs(found - model.cfg.gamma)


@torch.no_grad()
def depth_limit(model: HookedICTDTransformer, ctx: Contexts) -> Optional[float]:
    values, spectrum = limit_spectrum(model, ctx.long)
    if any(reason is not None for reason in spectrum.reason):
        return None
    limit = error_parts(values, ctx.long)["msve"].mean()
    ce = error_parts(ESTIMATORS[CE](ctx.long, model.cfg.gamma), ctx.long)["msve"].mean()
    return -abs(float(limit / ce) - 1.0)


@torch.no_grad()
def spectral_radius(model: HookedICTDTransformer, ctx: Contexts) -> float:
    return 1.0 - max(limit_spectrum(model, ctx.tasks)[1].radius)


def algorithm(model: HookedICTDTransformer, ctx: Contexts) -> float:
    last = _last(model)
    ok = last.in_family and last.kernel_isotropy is not None and last.kernel_isotropy >= ISOTROPIC
    ok = ok and last.b is not None and last.c is not None and last.b > 0 > last.c
    return float(ok and abs(last.effective_discount - model.cfg.gamma) <= DISCOUNT_BAND)


def profile(model: HookedICTDTransformer, ctx: Contexts) -> Optional[float]:
    errors = td_profile(model, ctx.tasks)
    return None if errors is None or not all(math.isfinite(e) for e in errors) else -max(errors)


def probe_td_error(model: HookedICTDTransformer, ctx: Contexts) -> Optional[float]:
    return _probe(model, ctx, "td_error")


def probe_next_value(model: HookedICTDTransformer, ctx: Contexts) -> Optional[float]:
    return _probe(model, ctx, "v_next")


@torch.no_grad()
def _probe(model: HookedICTDTransformer, ctx: Contexts, quantity: str) -> Optional[float]:
    """Held-out R² at the last layer's output of a linear probe for ``quantity`` (``site_probes.td_quantities``)."""
    fitted, scored = (_last_site(model, t) for t in (ctx.fit, ctx.tasks))
    targets = [td_quantities(t, model.cfg.gamma)[quantity].unsqueeze(0) for t in (ctx.fit, ctx.tasks)]
    probe = fit_probes(fitted, targets[0], quantity, next(model.parameters()).dtype)
    err = (probe.predict(scored) - targets[1]).pow(2).mean()
    return float(1 - err / targets[1].var(unbiased=False).clamp_min(1e-30))


def _last_site(model: HookedICTDTransformer, tasks: TaskBatch) -> Float[Tensor, "site=1 batch key_pos d_model"]:
    """The residual stream after the last block at the context columns, float64 (``site_probes``' last site)."""
    name = get_act_name("resid_post", model.cfg.n_layers - 1)
    _, cache = model.run_with_cache(tasks.prompt.to(model.device), names_filter=name)
    return cache[name][:, :-1].double().cpu().unsqueeze(0)


def causal_site(model: HookedICTDTransformer) -> str:
    """Where the causal readings look: the residual stream after the middle layer, ``L // 2 − 1``."""
    return get_act_name("resid_post", model.cfg.n_layers // 2 - 1)


def _causal_pair(model: HookedICTDTransformer) -> Optional[tuple[HookedICTDTransformer, HookedICTDTransformer]]:
    """A float64 CPU copy of ``model`` and θ* at its config; None for one layer (no layer before the output)."""
    if model.cfg.n_layers < 2:
        return None
    copied = copy.deepcopy(model).to("cpu").to(torch.float64).eval()
    return copied, HookedICTDTransformer.from_theta_star(copied.cfg).to(torch.float64).eval()


@torch.no_grad()
def causal_targets(
    model: HookedICTDTransformer, star: HookedICTDTransformer, tasks: TaskBatch
) -> tuple[Float[Tensor, "batch"], Float[Tensor, "batch"]]:
    """θ*'s **effect** on each pair (its prediction with its value row at ``causal_site`` swapped from the source,
    minus its own), and the **target**: ``model``'s own prediction plus that effect, what a move must produce."""
    site, row = causal_site(star), star.layout.current
    effect = row_swapped(star, tasks, row, site) - star(tasks.prompt)[:, -1]
    return model(tasks.prompt)[:, -1] + effect, effect


def effect_iia(moved: Tensor, target: Tensor, effect: Tensor) -> float:
    """``1 − MSE(moved, target) / mean(effect²)``: 1 when the move does what the swap does to θ*, 0 when it
    does nothing."""
    return 1.0 - float((moved - target).pow(2).mean() / effect.pow(2).mean().clamp_min(1e-30))


def patching_value(model: HookedICTDTransformer, ctx: Contexts) -> Optional[float]:
    if (pair := _causal_pair(model)) is None:
        return None
    model, star = pair
    row = model.layout.current

    def patch(base: Tensor, source: Tensor) -> Tensor:
        base = base.clone()
        base[..., row] = source[..., row]
        return base

    target, effect = causal_targets(model, star, ctx.tasks)
    return effect_iia(moved_predictions(model, ctx.tasks, causal_site(model), {"p": patch})["p"], target, effect)


def das_value(model: HookedICTDTransformer, ctx: Contexts) -> Optional[float]:
    if (pair := _causal_pair(model)) is None:
        return None
    model, star = pair
    site = causal_site(model)
    axis = fit_das(model, site, ctx.fit, causal_targets(model, star, ctx.fit)[0], DAS_SEEDS, DAS_STEPS)
    target, effect = causal_targets(model, star, ctx.tasks)
    return effect_iia(moved_predictions(model, ctx.tasks, site, {"d": swap_move(axis)})["d"], target, effect)


READINGS = (
    Reading("cos_V", "card", f"cos(V, V*) >= {COSINE_RULE} at every layer", COSINE_RULE, cos_v),
    Reading("cos_A", "card", f"cos(A, A*) >= {COSINE_RULE} at every layer", COSINE_RULE, cos_a),
    Reading("signature", "card", "(+, +, −) at every layer", 1.0, signature),
    Reading("diagonality", "card", "kernel diagonality at least θ*'s", 0.0, diagonality),
    Reading("discount", "toolkit", f"|effective discount − γ| <= {DISCOUNT_TOL}", -DISCOUNT_TOL, discount),
    Reading(
        "depth_limit", "toolkit", f"the layer's limit within {LIMIT_TOL:.0%} of CE's MSVE", -LIMIT_TOL, depth_limit
    ),
    Reading(
        "spectral_radius",
        "toolkit",
        f"the last layer's map contracts, ρ <= {1 - CONTRACTS}",
        CONTRACTS,
        spectral_radius,
    ),
    Reading(
        "algorithm", "toolkit", f"softmax-TD family, b > 0 > c, discount within γ ± {DISCOUNT_BAND}", 1.0, algorithm
    ),
    Reading(
        "td_profile",
        "toolkit",
        f"every layer's value activations within {PROFILE_RULE:.0%} of softmax TD's with its kernel",
        -PROFILE_RULE,
        profile,
    ),
    Reading(
        "probe_td_error", "field", f"TD-error probe R² >= {PROBE_RULE} at the last layer", PROBE_RULE, probe_td_error
    ),
    Reading(
        "probe_next_value", "field", f"v(S') probe R² >= {PROBE_RULE} at the last layer", PROBE_RULE, probe_next_value
    ),
    Reading(
        "patching_value",
        "field",
        f"patching the value row mid-network: effect IIA vs θ*'s >= {IIA_RULE}",
        IIA_RULE,
        patching_value,
    ),
    Reading(
        "das_value", "field", f"DAS for the value mid-network: effect IIA vs θ*'s >= {IIA_RULE}", IIA_RULE, das_value
    ),
)
BY_NAME = {r.name: r for r in READINGS}


def score_of(reading: Reading, model: HookedICTDTransformer, ctx: Contexts) -> Optional[float]:
    """``reading``'s score of ``model``; one that is not a finite number was not made (None), never scored as one."""
    score = reading.score(model, ctx)
    return None if score is None or not math.isfinite(score) else float(score)


# What the checkpoint track measured for TD vs stopped early (AUROC, 95% interval over runs), the numbers analyze
# quotes beside a model's own readings: the public population of docs/methods_benchmark.md ("The checkpoint track":
# the built-in study `checkpoints` with td-context, td-gamma-longer and td-gamma-deeper, 2026-12-07).
MEASURED_ON = "292 checkpoints of 73 runs, 16 of the checkpoints running TD"
MEASURED_AUROC: dict[str, tuple[float, float, float]] = {
    "discount": (0.88, 0.80, 0.95),
    "depth_limit": (1.00, 1.00, 1.00),
    "cos_V": (0.73, 0.59, 0.88),
    "cos_A": (0.54, 0.35, 0.75),
    "signature": (0.50, 0.50, 0.50),
    "diagonality": (0.53, 0.42, 0.65),
    "spectral_radius": (0.37, 0.28, 0.46),
    "algorithm": (0.50, 0.50, 0.50),
    "probe_td_error": (0.70, 0.53, 0.87),
    "probe_next_value": (0.63, 0.44, 0.85),
}
REPORTED = ("discount", "depth_limit", "cos_V", "cos_A", "signature")  # what analyze's Answer says
SEPARATES = 0.95  # a reading "tells TD from stopped early" when its AUROC's interval lies at or above this


@dataclass(kw_only=True)
class WeightReading:
    """One reading of one model for the report: its score, whether its rule reads the model as TD, the rule, and
    the AUROC the track measured for it ([value, lo, hi]; None where unmeasured)."""

    name: str
    score: Optional[float]
    reads_as_td: bool
    rule: str
    auroc: Optional[list[float]]

    @property
    def tells(self) -> Optional[bool]:
        """Its measured AUROC's interval lies at or above ``SEPARATES`` (True), below it (False), else None."""
        if self.auroc is None:
            return None
        return True if self.auroc[1] >= SEPARATES else False if self.auroc[2] < SEPARATES else None


def read_model(model: HookedICTDTransformer, ctx: Contexts, names: tuple[str, ...] = REPORTED) -> list[WeightReading]:
    """``names``' readings of one model (a stylised model the state-space forward covers), with their rules."""
    out = []
    for name in names:
        reading = BY_NAME[name]
        score = score_of(reading, model, ctx)
        measured = MEASURED_AUROC.get(name)
        out.append(
            WeightReading(
                name=name,
                score=score,
                reads_as_td=score is not None and score >= reading.threshold,
                rule=reading.rule,
                auroc=None if measured is None else list(measured),
            )
        )
    return out
