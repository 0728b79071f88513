"""What each benchmark case plants (``CaseSpec``) and the cases the benchmark runs (``CASES``): data only; the
weights are written by ``planting`` and the case is built by ``cases.build_case``."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ictd_interp.config import TaskDistribution

THETA_STAR = "theta*"  # a case's source: θ*'s construction, else the name of a shipped stylised model
SOURCE_SEEDS = 5  # the shipped depth3-td-s0 .. s4


@dataclass
class CaseSpec:
    """One planted case (validated on construction). Heads per layer: 1 TD head (2 with ``split_td``: the reward
    part and the value part of its update, ``planting.split_td_head``), ``silent_heads``, ``junk_heads``,
    ``2 * cancelling_pairs``, ``leak_heads`` (random heads writing into the circuit's own dimensions at graded
    small scales: the ``k``-th at ``leak_scale · k / leak_heads``, so their edges have small, non-zero effects);
    ``d_mlp`` junk MLP units; ``junk_dims`` extra residual dimensions; ``rotate``: hide the basis;
    ``layer_norm``: pre-LN blocks held near θ*'s map by a read-in bias of size ``anchor`` in a dimension of its
    own (``planting.anchor_layer_norm``). ``source``: whose layers the TD heads carry, θ*'s or a shipped
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
    split_td: bool = False
    dormant_heads: int = 0  # heads with large weights whose values read a dimension the data never fills
    closed_units: bool = False  # the MLP units write into the circuit, kept shut by their biases
    disguised: bool = False  # a cancelling pair's second head differs from the first along an always-zero dimension
    relayed: bool = False  # per layer a relay writer and an eraser: layer l's write is erased by layer l + 1's
    broadcast_heads: int = 0  # heads writing the same vector at every position, read by later TD heads' keys
    entangled: bool = False  # each superposed feature written by two units firing together, neither along it
    layer_norm: bool = False
    anchor: float = 0.0
    source: str = THETA_STAR
    description: str = ""
    solve: str = ""  # what a method must do to solve the case (the report prints it)

    def __post_init__(self) -> None:
        """The counts each in its range, then the options that need each other (the first problem is the error)."""
        self._check_counts()
        self._check_pairs()
        self._check_circuit_options()

    def _check_counts(self) -> None:
        for key in ("n_layers", "d_features", "n_states", "context_len", "n_tasks"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise ValueError(f"case {self.name!r}: {key} must be a positive integer, got {getattr(self, key)!r}")
        for key in (
            "silent_heads",
            "junk_heads",
            "cancelling_pairs",
            "d_mlp",
            "junk_dims",
            "leak_heads",
            "dormant_heads",
            "broadcast_heads",
        ):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 0:
                raise ValueError(f"case {self.name!r}: {key} must be an integer >= 0, got {getattr(self, key)!r}")

    def _check_pairs(self) -> None:
        """Settings that come in pairs: a count and its scale, a switch and its number."""
        if (self.leak_heads > 0) != (self.leak_scale > 0):
            raise ValueError(
                f"case {self.name!r}: leak heads need a leak_scale > 0 and the reverse, got leak_heads="
                f"{self.leak_heads}, leak_scale={self.leak_scale!r}"
            )
        if self.layer_norm != (self.anchor > 0):
            raise ValueError(
                f"case {self.name!r}: layer_norm needs an anchor > 0 and the reverse, got layer_norm="
                f"{self.layer_norm}, anchor={self.anchor!r}"
            )
        if not 0.0 <= self.mlp_active < 1.0 or (self.mlp_active and not self.d_mlp):
            raise ValueError(
                f"case {self.name!r}: mlp_active must lie in [0, 1) and needs d_mlp >= 1, got "
                f"{self.mlp_active!r} with d_mlp={self.d_mlp}"
            )

    def _check_circuit_options(self) -> None:
        """Options that need θ*'s circuit, or junk dimensions to write into."""
        if self.split_td and self.source != THETA_STAR:
            raise ValueError(f"case {self.name!r}: split_td splits θ*'s head (its scores read features only)")
        if self.disguised and (not self.cancelling_pairs or self.junk_dims != 1 or self.junk_heads or self.d_mlp):
            raise ValueError(
                f"case {self.name!r}: disguised needs cancelling pairs and one junk dimension that nothing writes "
                "(no junk heads, no MLP units): the dimension the pairs' second heads differ along stays 0"
            )
        if (self.relayed or self.broadcast_heads) and (self.junk_heads or self.d_mlp or self.source != THETA_STAR):
            raise ValueError(
                f"case {self.name!r}: relays and broadcast heads need θ*'s circuit (a relay's write is in the null "
                "space of θ*'s readers) and no junk heads or MLP units (they would write the always-zero dimension)"
            )
        if self.junk_dims < self.relayed + 2 * bool(self.broadcast_heads):
            raise ValueError(
                f"case {self.name!r}: relays need junk_dims >= 1 (the always-zero dimension), broadcast heads >= 2 "
                f"(it and one to write into), got junk_dims={self.junk_dims}"
            )
        if self.entangled and (not self.mlp_active or self.d_mlp % 2 or self.junk_dims < 2 or self.junk_heads):
            raise ValueError(
                f"case {self.name!r}: entangled features need mlp_active > 0, an even d_mlp (two units a feature), "
                "junk_dims >= 2 (the always-zero dimension and one to write into) and no junk heads"
            )
        if self.closed_units and (not self.d_mlp or self.mlp_active):
            raise ValueError(f"case {self.name!r}: closed_units needs d_mlp >= 1 and no mlp_active (they never fire)")
        if (self.junk_heads or self.d_mlp or self.dormant_heads) and not self.junk_dims:
            raise ValueError(
                f"case {self.name!r}: junk heads and MLP units write into junk dimensions; set junk_dims >= 1"
            )

    @property
    def td_heads(self) -> int:
        return 2 if self.split_td else 1

    @property
    def n_heads(self) -> int:
        return (
            self.td_heads
            + self.silent_heads
            + self.junk_heads
            + 2 * self.cancelling_pairs
            + self.dormant_heads
            + 2 * self.relayed
            + self.broadcast_heads
            + self.leak_heads
        )

    @property
    def roles(self) -> list[str]:
        """Each head's role in a layer, in head order."""
        return (
            ["td"]
            + ["td-value"] * self.split_td
            + ["silent"] * self.silent_heads
            + ["junk"] * self.junk_heads
            + ["cancelling"] * (2 * self.cancelling_pairs)
            + ["dormant"] * self.dormant_heads
            + ["relay-write", "relay-erase"] * self.relayed
            + ["broadcast"] * self.broadcast_heads
            + ["leak"] * self.leak_heads
        )

    @property
    def d_model(self) -> int:
        """The residual width: the circuit's ``d + 3`` rows, the junk dimensions, with LayerNorm the anchor's two."""
        return self.d_features + 3 + self.junk_dims + 2 * self.layer_norm

    @property
    def zero_dimension(self) -> bool:
        """Whether the read-in fills the first junk dimension from the prompt's always-zero current-value column
        (dormant heads, disguised pairs, relay erasers, broadcast queries and entangled units' twins read it: large
        weights, 0 on data)."""
        return bool(self.dormant_heads or self.disguised or self.relayed or self.broadcast_heads or self.entangled)

    @property
    def exact_variables(self) -> bool:
        """Whether the variables lie exactly on the unrotated circuit's rows: not where leaks or LayerNorm move
        them off θ*'s values (no direction is scored there)."""
        return not (self.leak_heads or self.layer_norm)

    @property
    def tasks(self) -> TaskDistribution:
        return TaskDistribution(n_states=self.n_states, d_features=self.d_features, context_len=self.context_len)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def source_name(spec: CaseSpec, seed: int) -> str:
    """The source at a benchmark seed: ``spec.source``, its ``{k}`` filled with ``seed`` modulo ``SOURCE_SEEDS``
    (the trained case carries a different shipped seed's layer at each of 5 consecutive seeds)."""
    return spec.source.format(k=seed % SOURCE_SEEDS)


CASES: dict[str, CaseSpec] = {
    spec.name: spec
    for spec in (
        CaseSpec(
            "rotated",
            solve="read effects through any basis; a control: weights alone solve it",
            description="θ*'s circuit alone, behind a random rotation",
        ),
        CaseSpec(
            "distractors",
            solve="tell writes that reach the output from writes nothing reads (weights alone solve it: the junk meets "
            "no reader)",
            silent_heads=1,
            junk_heads=2,
            d_mlp=8,
            junk_dims=4,
            description="+ a silent head, two junk heads and 8 junk MLP units per layer, 4 junk dimensions",
        ),
        CaseSpec(
            "cancelling",
            solve="test each pair's edges together; weights alone solve it by pairing heads with equal Q, K, V",
            junk_heads=1,
            cancelling_pairs=1,
            junk_dims=2,
            description="+ a pair of heads per layer whose writes cancel exactly, and a junk head",
        ),
        CaseSpec(
            "superposed",
            solve="edges as `distractors`; features: more sparse quantities than dimensions, found from activations "
            "(each unit is a feature, so the weights give their directions)",
            d_mlp=6,
            junk_dims=3,
            mlp_active=0.1,
            description="+ 6 sparse ReLU junk units per layer (each active on 10 % of positions) in 3 junk "
            "dimensions: 6, 12, 18 features superposed in 3 dimensions after blocks 0, 1, 2",
        ),
        CaseSpec(
            "entangled",
            solve="find feature directions from activations: no unit's weights point along a feature (edges as "
            "`superposed`)",
            d_mlp=16,
            junk_dims=7,
            mlp_active=0.1,
            entangled=True,
            description="as `superposed`, 8 sparse features per layer in 6 junk dimensions (8, 16, 24 after blocks 0, "
            "1, 2), but each feature is written by two ReLU units that fire together, their W_out rows the feature's "
            "direction plus and minus a part three times larger that cancels in the sum, their W_in rows disguised "
            "along the always-zero dimension: no unit's weights point along a feature",
        ),
        CaseSpec(
            "graded",
            solve="rank small, real effects below the circuit's (the leak weights are as small as their effects: "
            "weights alone nearly solve it)",
            n_layers=4,
            silent_heads=1,
            leak_heads=3,
            leak_scale=0.002,
            description="4 layers; + a silent head and 3 leak heads per layer writing into the circuit's own "
            "dimensions at 0.0007, 0.0013 and 0.002 of a unit scale: every leak edge has a small, non-zero effect",
        ),
        CaseSpec(
            "split",
            solve="see that edges with non-zero weights carry nothing on these prompts (the first value head reads a "
            "value still 0): read activations",
            split_td=True,
            silent_heads=1,
            junk_heads=1,
            junk_dims=2,
            description="the TD update in two heads per layer, its reward part and its value part (the first "
            "layer's value part reads a value still 0 and writes nothing), + a silent head and a junk head",
        ),
        CaseSpec(
            "layernorm",
            solve="rank the norm's small, real effects below the circuit's",
            layer_norm=True,
            anchor=16.0,
            silent_heads=1,
            junk_heads=2,
            d_mlp=4,
            junk_dims=3,
            description="pre-LN blocks, held near θ*'s map by a read-in bias of 16 in a dimension of its own, + a "
            "silent head, two junk heads and 4 junk MLP units per layer: the junk moves the norm, so every junk "
            "edge has a small, non-zero effect",
        ),
        CaseSpec(
            "dormant",
            solve="read activations or effects: the largest weights carry exact zeros on every prompt",
            dormant_heads=1,
            d_mlp=4,
            closed_units=True,
            junk_dims=1,
            description="+ a dormant head per layer, its values reading a dimension the read-in fills from the "
            "prompt's always-zero current-value column, and 4 ReLU units per layer shut by their biases: both "
            "write large weights into the circuit's own dimensions and output exactly 0 on every prompt",
        ),
        CaseSpec(
            "disguised",
            solve="test edges together, with no equal weights to pair",
            cancelling_pairs=1,
            junk_dims=1,
            disguised=True,
            description="+ a pair of heads per layer whose writes cancel exactly on every prompt, the second's Q, K "
            "and V differing from the first's along a dimension the read-in fills from the prompt's always-zero "
            "value column: no two heads share their weights, so a reader of weights cannot pair them",
        ),
        CaseSpec(
            "relayed",
            solve="test edges together across layers: a writer's and its eraser's edges reach the output only together,"
            " and no weights pair them",
            relayed=True,
            junk_dims=1,
            description="+ per layer a relay writer and an eraser: layer l's writer adds a large write along the "
            "target and current-value rows, which θ*'s readers cannot see (their values read R + t − v), and layer "
            "l + 1's eraser, the writer's Q, K and V disguised along the always-zero dimension, subtracts it: "
            "cancellation across layers, each write alone reaching the output",
        ),
        CaseSpec(
            "broadcast",
            solve="see in activations that a write into keys is the same at every position: softmax ignores it, the "
            "weights say it is large",
            broadcast_heads=2,
            junk_dims=3,
            description="+ per layer two broadcast heads, attending by the keys' content with one query from every "
            "position (a bias; their W_Q reads only the always-zero dimension), so each writes the same vector at "
            "every position into 2 junk dimensions, which the later TD heads' keys read with large weights: a "
            "write the same for every key moves every score alike, and softmax ignores it",
        ),
        CaseSpec(
            "trained",
            solve="as `distractors`, around a trained layer",
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
        CaseSpec(
            "trained-disguised",
            solve="as `disguised`, around a trained layer",
            d_features=4,
            cancelling_pairs=1,
            junk_dims=1,
            disguised=True,
            source="depth3-td-s{k}",
            description="the trained layer of `trained`, + per layer a disguised cancelling pair as in `disguised`",
        ),
    )
}
