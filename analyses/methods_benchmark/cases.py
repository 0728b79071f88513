"""Benchmark cases: standard-architecture models with a planted circuit whose ground truth is known exactly.

Each case starts from θ*'s circuit in a standard block (``standard_theta_star``: per layer one TD head that
attends with the softmax-TD kernel and adds ``α K (R − v)`` to the value; the bootstrap path cut), then
hides it:

* **distractors** — *silent* heads (random queries, keys and values, ``W_O = 0``: they compute and write
  nothing); *junk* heads and MLP units that read the whole residual stream and write only into extra
  ``junk`` dimensions that nothing on the circuit reads (their activations vary, their effect on the output
  is exactly 0); *cancelling pairs* of heads with equal queries, keys and values and opposite ``W_O`` writing
  into the circuit's own dimensions (together they add 0 to rounding error, one alone does not);
* **superposed features** (``mlp_active > 0``): the junk MLP units are ReLU units, each biased to be active on
  a share ``mlp_active`` of the fit prompts' positions (calibrated layer by layer), writing into fewer junk
  dimensions than there are units — more sparse quantities than dimensions, off the circuit's path;
* **a random orthogonal change of residual basis** ``Q`` (``W_E → W_E Q``, readers ``W → Qᵀ W``, writers
  ``W_O → W_O Q``, ``W_U → Qᵀ W_U``): without LayerNorm the function is unchanged (to 1e-12 in float64), and
  the variables' directions are the rows of ``Q`` — known only through the rotation.

The ground truth each case exports: the circuit's edges (``embed`` → every TD head, every TD head → every
later TD head and → ``output``), every node's role, and each variable's direction in the residual stream with
the hook names where the variable lies exactly on it (``reward`` everywhere; ``value``, the current-value row,
after each block); in a superposed case also ``features``: at each block's output the activations of every
junk unit written so far (``feature_values``) and their unit write directions.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from analyses.methods_benchmark.graph import OUTPUT, Edge, head_name, mlp_name
from analyses.metrics.site_probes import residual_stack
from ictd_interp.config import ICTDConfig, TaskDistribution
from ictd_interp.config.standard import StandardConfig
from ictd_interp.models.architectures.hook_names import get_act_name
from ictd_interp.models.architectures.ictd import HookedICTDTransformer
from ictd_interp.models.architectures.standard import HookedStandardTransformer
from ictd_interp.models.constructions.standard_theta_star import standard_theta_star, theta_star_weights
from ictd_interp.models.fast.state_space import state_space_unavailable
from ictd_interp.tasks import TaskBatch, sample_from

ROLES = ("td", "silent", "junk", "cancelling", "mlp-junk")
THETA_STAR = "theta*"  # a case's source: θ*'s construction, else the name of a shipped stylised model


@dataclass
class CaseSpec:
    """One planted case (validated on construction). Heads per layer: 1 TD head, ``silent_heads``,
    ``junk_heads``, ``2 * cancelling_pairs``, ``leak_heads`` (random heads writing into the circuit's own
    dimensions at graded small scales: the ``k``-th at ``leak_scale · k / leak_heads``, so their edges have small,
    non-zero effects); ``d_mlp`` junk MLP units; ``junk_dims`` extra residual
    dimensions; ``rotate``: hide the basis. ``source``: whose layers the TD heads carry, θ*'s or a shipped
    stylised model's (TSM form, paper mask: its layer is a fixed map read from its weights, ``d_features`` and
    ``n_layers`` its own). Tasks: Boyan chains of ``n_states`` states, ``d_features`` features, contexts of
    ``context_len``; ``n_tasks`` clean prompts, as many corrupted ones (independent tasks)."""

    name: str
    n_layers: int = 3
    d_features: int = 3
    silent_heads: int = 0
    junk_heads: int = 0
    cancelling_pairs: int = 0
    d_mlp: int = 0
    junk_dims: int = 0
    rotate: bool = True
    n_states: int = 6
    context_len: int = 16
    n_tasks: int = 32
    weight_scale: float = 0.5
    mlp_active: float = 0.0  # > 0: ReLU junk units, each active on this share of positions (superposed features)
    leak_heads: int = 0
    leak_scale: float = 0.0
    source: str = THETA_STAR
    description: str = ""

    def __post_init__(self) -> None:
        for key in ("n_layers", "d_features", "n_states", "context_len", "n_tasks"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise ValueError(f"case {self.name!r}: {key} must be a positive integer, got {getattr(self, key)!r}")
        if (self.leak_heads > 0) != (self.leak_scale > 0):
            raise ValueError(
                f"case {self.name!r}: leak heads need a leak_scale > 0 and the reverse, got leak_heads="
                f"{self.leak_heads}, leak_scale={self.leak_scale!r}"
            )
        for key in ("silent_heads", "junk_heads", "cancelling_pairs", "d_mlp", "junk_dims", "leak_heads"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 0:
                raise ValueError(f"case {self.name!r}: {key} must be an integer >= 0, got {getattr(self, key)!r}")
        if not 0.0 <= self.mlp_active < 1.0 or (self.mlp_active and not self.d_mlp):
            raise ValueError(
                f"case {self.name!r}: mlp_active must lie in [0, 1) and needs d_mlp >= 1, got "
                f"{self.mlp_active!r} with d_mlp={self.d_mlp}"
            )
        if (self.junk_heads or self.d_mlp) and not self.junk_dims:
            raise ValueError(
                f"case {self.name!r}: junk heads and MLP units write into junk dimensions; set junk_dims >= 1"
            )

    @property
    def n_heads(self) -> int:
        return 1 + self.silent_heads + self.junk_heads + 2 * self.cancelling_pairs + self.leak_heads

    @property
    def tasks(self) -> TaskDistribution:
        return TaskDistribution(n_states=self.n_states, d_features=self.d_features, context_len=self.context_len)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


CASES: dict[str, CaseSpec] = {
    spec.name: spec
    for spec in (
        CaseSpec("rotated", description="θ*'s circuit alone, behind a random rotation"),
        CaseSpec(
            "distractors",
            silent_heads=1,
            junk_heads=2,
            d_mlp=8,
            junk_dims=4,
            description="+ a silent head, two junk heads and 8 junk MLP units per layer, 4 junk dimensions",
        ),
        CaseSpec(
            "cancelling",
            junk_heads=1,
            cancelling_pairs=1,
            junk_dims=2,
            description="+ a pair of heads per layer whose writes cancel exactly, and a junk head",
        ),
        CaseSpec(
            "superposed",
            d_mlp=6,
            junk_dims=3,
            mlp_active=0.1,
            description="+ 6 sparse ReLU junk units per layer (each active on 10 % of positions) in 3 junk "
            "dimensions: 6, 12, 18 features superposed in 3 dimensions after blocks 0, 1, 2",
        ),
        CaseSpec(
            "graded",
            n_layers=4,
            silent_heads=1,
            leak_heads=3,
            leak_scale=0.002,
            description="4 layers; + a silent head and 3 leak heads per layer writing into the circuit's own "
            "dimensions at 0.0007, 0.0013 and 0.002 of a unit scale: every leak edge has a small, non-zero effect",
        ),
        CaseSpec(
            "trained",
            d_features=4,
            silent_heads=1,
            junk_heads=1,
            d_mlp=4,
            junk_dims=2,
            source="depth3-td-s{k}",
            description="a TD-trained tied layer (read from its weights) in place of θ*'s — the shipped "
            "depth3-td-s0 … s4, seed k carrying s(k mod 5) — with a silent head, a junk head and 4 junk MLP units "
            "per layer",
        ),
    )
}


@dataclass(frozen=True)
class GroundTruth:
    """What the case planted: the circuit's ``edges`` (a subset of ``build_graph(model).edges``), each node's
    ``role``, each variable's unit ``directions`` in the residual stream and the ``sites`` (hook names) where the
    variable equals ``resid · direction`` exactly (none in a case with leak heads: no direction is scored there)."""

    edges: frozenset[Edge]
    roles: dict[str, str]
    directions: dict[str, Float[Tensor, "d_model"]]
    sites: dict[str, tuple[str, ...]] = field(default_factory=dict)
    features: dict[str, Float[Tensor, "feature d_model"]] = field(default_factory=dict)  # site -> unit directions

    @property
    def nodes(self) -> frozenset[str]:
        """The circuit's nodes (``embed`` and the TD heads)."""
        return frozenset(u for u, _ in self.edges)


@dataclass
class Case:
    """A built case: the model, its ground truth, clean and corrupted tasks (and two more batches for probes)."""

    spec: CaseSpec
    seed: int
    model: HookedStandardTransformer
    truth: GroundTruth
    clean: TaskBatch
    corrupted: TaskBatch
    fit: TaskBatch
    held_out: TaskBatch
    rotation: Float[Tensor, "d_model d_model"]
    reference: HookedStandardTransformer  # the source's circuit alone, unrotated (``standard_theta_star``)


@dataclass(frozen=True)
class Problem:
    """What a method receives (``problem_of``): the questions, never the answers. Its own copy of the model (an
    edit cannot reach the scorer or the next method), the clean, corrupted and fit tasks (the held-out ones stay
    with the scorer), where each causal variable is to be looked for (``variable_sites``) and where the residual
    stream is to be decomposed (``feature_sites``), the planted units' designed firing rate (``feature_rate``), and
    the high-level causal model's values on the fit tasks, the supervision a probe or DAS trains on (as MIB gives
    its causal model): each variable at every residual site (``fit_values``) and the query prediction when a
    variable at a site takes the next task's value (``fit_counterfactuals``). The edges, directions, features
    and rotation of the planted circuit are not in it."""

    name: str
    seed: int
    model: HookedStandardTransformer
    clean: TaskBatch
    corrupted: TaskBatch
    fit: TaskBatch
    variable_sites: dict[str, tuple[str, ...]]
    feature_sites: tuple[str, ...]
    feature_rate: float
    fit_values: dict[str, Float[Tensor, "site batch pos"]]
    fit_counterfactuals: dict[tuple[str, str], Float[Tensor, "batch"]]


def problem_of(case: Case) -> Problem:
    """The ``Problem`` a method is given on ``case``: fresh copies of the model and the task batches each call."""
    counterfactuals = {
        (name, site): counterfactual_labels(case, case.fit, name, site)
        for name, sites in case.truth.sites.items()
        for site in sites
    }
    return Problem(
        case.spec.name,
        case.seed,
        copy.deepcopy(case.model),
        copy.deepcopy(case.clean),
        copy.deepcopy(case.corrupted),
        copy.deepcopy(case.fit),
        dict(case.truth.sites),
        tuple(case.truth.features),
        case.spec.mlp_active,
        variable_values(case, case.fit),
        counterfactuals,
    )


def random_rotation(n: int, generator: torch.Generator) -> Float[Tensor, "n n"]:
    """A Haar-random orthogonal matrix (QR of a Gaussian, signs fixed by R's diagonal)."""
    q, r = torch.linalg.qr(torch.randn(n, n, generator=generator, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))


def _roles(spec: CaseSpec) -> list[str]:
    """Each head's role in a layer, in head order."""
    return (
        ["td"]
        + ["silent"] * spec.silent_heads
        + ["junk"] * spec.junk_heads
        + ["cancelling"] * (2 * spec.cancelling_pairs)
        + ["leak"] * spec.leak_heads
    )


def _plant(spec: CaseSpec, weights: dict[str, Tensor], generator: torch.Generator) -> None:
    """Fill the distractors' weights in the unrotated basis (first ``d + 3`` dimensions: the circuit's,
    the rest junk)."""
    m, s = spec.d_features + 3, spec.weight_scale
    junk = slice(m, m + spec.junk_dims)
    randn = lambda *shape: s * torch.randn(*shape, generator=generator, dtype=torch.float64)  # noqa: E731
    for layer in range(spec.n_layers):
        attn = f"blocks.{layer}.attn"
        for h, role in enumerate(_roles(spec)):
            if role == "td" or (role == "cancelling" and (h - 1 - spec.silent_heads - spec.junk_heads) % 2):
                continue
            for name in ("W_Q", "W_K", "W_V"):
                weights[f"{attn}.{name}"][h] = randn(*weights[f"{attn}.{name}"][h].shape)
            if role == "junk":
                weights[f"{attn}.W_O"][h, :, junk] = randn(weights[f"{attn}.W_O"].shape[1], spec.junk_dims)
            elif role == "leak":  # the k-th leak head (k = 1, 2, ...) at leak_scale · k / leak_heads
                k = h - (spec.n_heads - spec.leak_heads) + 1
                grade = spec.leak_scale * k / spec.leak_heads
                weights[f"{attn}.W_O"][h, :, :m] = grade * randn(weights[f"{attn}.W_O"].shape[1], m) / s
            elif role == "cancelling":
                weights[f"{attn}.W_O"][h, :, :m] = randn(weights[f"{attn}.W_O"].shape[1], m)
                for name in ("W_Q", "W_K", "W_V"):
                    weights[f"{attn}.{name}"][h + 1] = weights[f"{attn}.{name}"][h]
                weights[f"{attn}.W_O"][h + 1] = -weights[f"{attn}.W_O"][h]
        if spec.d_mlp:
            mlp = f"blocks.{layer}.mlp"
            weights[f"{mlp}.W_in"] = randn(*weights[f"{mlp}.W_in"].shape)
            weights[f"{mlp}.b_in"] = randn(spec.d_mlp)
            weights[f"{mlp}.W_out"][:, junk] = randn(spec.d_mlp, spec.junk_dims)


def _rotate(weights: dict[str, Tensor], Q: Tensor) -> None:
    """The change of residual basis ``x → x Q``: writers right-multiplied by ``Q``, readers left by ``Qᵀ``."""
    for name, w in weights.items():
        leaf = name.rsplit(".", 1)[-1]
        if leaf in ("W_E", "b_E", "W_pos", "W_O", "b_O", "W_out", "b_out"):
            weights[name] = w @ Q
        elif leaf in ("W_Q", "W_K", "W_V", "W_in", "W_U"):
            weights[name] = Q.T @ w


def _truth(spec: CaseSpec, model: HookedStandardTransformer, Q: Tensor) -> GroundTruth:
    layout = model.layout
    td = [head_name(layer, 0) for layer in range(spec.n_layers)]
    edges = {("embed", v) for v in td} | {(u, OUTPUT) for u in td}
    edges |= {(td[a], td[b]) for a in range(spec.n_layers) for b in range(a + 1, spec.n_layers)}
    roles = {"embed": "embed"}
    for layer in range(spec.n_layers):
        roles |= {head_name(layer, h): role for h, role in enumerate(_roles(spec))}
        if spec.d_mlp:
            roles[mlp_name(layer)] = "mlp-junk"
    sites = tuple(residual_sites(model))
    features = {}
    if spec.mlp_active:  # after block l, the units of blocks 0..l, each along its (rotated) write direction
        writes = [b.mlp.W_out.detach() / b.mlp.W_out.detach().norm(dim=-1, keepdim=True) for b in model.blocks]
        features = {sites[l + 1]: torch.cat(writes[: l + 1]) for l in range(spec.n_layers)}
    exact = {"reward": sites, "value": sites[1:]} if not spec.leak_heads else {}  # leaks move every variable
    return GroundTruth(
        frozenset(edges),
        roles,
        {"reward": Q[layout.reward].clone(), "value": Q[layout.current].clone()},
        exact,
        features,
    )


def source_name(spec: CaseSpec, seed: int) -> str:
    """The source at a benchmark seed: ``spec.source``, its ``{k}`` filled with ``seed`` modulo ``SOURCE_SEEDS``
    (the trained case carries a different shipped seed's layer at each of 5 consecutive seeds)."""
    return spec.source.format(k=seed % SOURCE_SEEDS)


SOURCE_SEEDS = 5  # the shipped depth3-td-s0 .. s4


def circuit_source(spec: CaseSpec, seed: int = 0) -> HookedICTDTransformer:
    """The stylised model whose layers the case's TD heads carry (float64): θ* of the spec's depth, or the
    shipped model ``source_name(spec, seed)``, refused, naming why, where its layer is not a fixed map or does
    not fit."""
    if spec.source == THETA_STAR:
        return HookedICTDTransformer.from_theta_star(
            ICTDConfig(d_features=spec.d_features, n_layers=spec.n_layers, dtype="float64")
        )
    name = source_name(spec, seed)
    model = HookedICTDTransformer.from_pretrained(name, dtype="float64")
    reason = state_space_unavailable(model.cfg)
    if reason is not None:
        raise ValueError(f"case {spec.name!r}: source {name!r} is not a fixed map of the prompt ({reason})")
    if (model.cfg.d_features, model.cfg.n_layers) != (spec.d_features, spec.n_layers):
        raise ValueError(
            f"case {spec.name!r}: source {name!r} has d_features={model.cfg.d_features}, "
            f"n_layers={model.cfg.n_layers}; the case says {spec.d_features}, {spec.n_layers}"
        )
    return model


def build_case(spec: CaseSpec, seed: int) -> Case:
    """The case's model and tasks for one benchmark seed (everything drawn from ``seed``)."""
    gen = torch.Generator().manual_seed(seed)
    m = spec.d_features + 3
    cfg = StandardConfig(
        d_features=spec.d_features,
        d_model=m + spec.junk_dims,
        d_head=m,
        n_heads=spec.n_heads,
        n_layers=spec.n_layers,
        d_mlp=spec.d_mlp,
        layer_norm=False,
        dtype="float64",
        seed=seed,
        act_fn="relu" if spec.mlp_active else "gelu",
    )
    star = circuit_source(spec, seed)
    weights = theta_star_weights(star, cfg)
    _plant(spec, weights, gen)
    Q = random_rotation(cfg.d_model, gen) if spec.rotate else torch.eye(cfg.d_model, dtype=torch.float64)
    _rotate(weights, Q)
    model = HookedStandardTransformer(cfg)
    model.load_state_dict(weights)
    draw = lambda k: sample_from(spec.tasks, spec.n_tasks, seed=seed * 4 + k)  # noqa: E731
    fit = draw(2)
    if spec.mlp_active:
        _calibrate_sparsity(model, fit, spec.mlp_active)
    return Case(spec, seed, model, _truth(spec, model, Q), draw(0), draw(1), fit, draw(3), Q, standard_theta_star(star))


@torch.no_grad()
def _calibrate_sparsity(model: HookedStandardTransformer, fit: TaskBatch, active: float) -> None:
    """Each junk unit's bias set, block by block, so that the unit is active (pre-activation > 0) on a share
    ``active`` of the fit prompts' positions (the earlier blocks already calibrated)."""
    for l, block in enumerate(model.blocks):
        block.mlp.b_in.zero_()
        name = f"blocks.{l}.mlp.hook_pre"
        _, cache = model.run_with_cache(fit.prompt, names_filter=name)
        pre = cache[name].reshape(-1, block.mlp.b_in.shape[0])
        block.mlp.b_in.copy_(-torch.quantile(pre, 1.0 - active, dim=0))


@torch.no_grad()
def feature_values(case: Case, tasks: TaskBatch) -> dict[str, Float[Tensor, "sample feature"]]:
    """A superposed case's true features at each site where they lie (``truth.features``): the junk units'
    activations (``hook_post`` of blocks 0..l after block l), one row per prompt position."""
    names = [f"blocks.{l}.mlp.hook_post" for l in range(case.spec.n_layers)]
    _, cache = case.model.run_with_cache(tasks.prompt, names_filter=lambda n: n in names)
    acts = [cache[n].reshape(-1, case.spec.d_mlp) for n in names]
    return {site: torch.cat(acts[: l + 1], dim=1) for l, site in enumerate(case.truth.features)}


def residual_sites(model: HookedStandardTransformer) -> list[str]:
    """The hook names of ``analyses.metrics.site_probes.residual_stack``'s sites, in order."""
    return [get_act_name("resid_pre", 0)] + [get_act_name("resid_post", l) for l in range(model.cfg.n_layers)]


@torch.no_grad()
def variable_values(case: Case, tasks: TaskBatch) -> dict[str, Float[Tensor, "site batch pos"]]:
    """The true variables at every residual site, computed without the planted model: the reward from the
    prompt, the value from the unrotated θ* circuit (``case.reference``)'s current-value row."""
    resid = residual_stack(case.reference, tasks.prompt)
    current, reward = case.reference.layout.current, case.reference.layout.reward
    return {"reward": tasks.prompt[..., reward].double().expand(resid.shape[0], -1, -1), "value": resid[..., current]}


VARIABLE_ROWS = {"reward": "reward", "value": "current"}  # each variable's row of the unrotated prompt layout


def source_prompts(tasks: TaskBatch) -> Float[Tensor, "batch pos d_prompt"]:
    """The source of each interchange pair: the next task's prompt (task ``b`` takes ``b + 1``'s variable)."""
    return tasks.prompt.roll(-1, dims=0)


@torch.no_grad()
def counterfactual_labels(case: Case, tasks: TaskBatch, variable: str, site: str) -> Float[Tensor, "batch"]:
    """The query prediction when ``variable`` at ``site`` takes its value from the source prompt, everything
    else the base prompt's: computed on the unrotated θ* circuit (``case.reference``), where the variable is
    one row of the residual stream."""
    row = getattr(case.reference.layout, VARIABLE_ROWS[variable])
    _, cache = case.reference.run_with_cache(source_prompts(tasks), names_filter=site)
    source = cache[site][..., row]

    def swap(resid: Tensor, hook) -> Tensor:
        resid = resid.clone()
        resid[..., row] = source
        return resid

    return case.reference.run_with_hooks(tasks.prompt, fwd_hooks=[(site, swap)])[:, -1]
