"""A case's weights, planted around θ*'s circuit in a standard block, as small pure functions on a state dict.

The unrotated residual basis: the circuit's ``m = d + 3`` dimensions first (the prompt's rows: features, reward,
target, current value), then ``junk_dims`` dimensions only distractors write, then, with LayerNorm, an *anchor*
dimension and a last dimension nothing writes.

* ``split_td_head``: head 0's update ``α K (R − v)`` in two heads with head 0's pattern: head 0 keeps every value
  row but the current value's (``α K R``), head 1 takes that row (``−α K v``). The pattern is the same, so the two
  writes sum to head 0's, exactly. Head 0 then reads only what the read-in writes (its scores read features,
  ``A* = diag(I_d, 0, 0, 0)``), and head 1 of layer 0 reads a value that is still 0: it writes nothing.
* ``anchor_layer_norm``: pre-LN blocks compute ``x̂ = (x − mean x) / s`` with ``s = √(mean x² + eps)``. The read-in
  bias puts ``anchor`` in the anchor dimension; the change of basis ``mean_fixing_rotation`` keeps every write
  orthogonal to the all-ones vector (centring is the identity), so ``s = √((anchor² + |x_c|²) / D + eps)`` for a
  residual whose other part is ``x_c``. The TD heads' readers and the read-out are multiplied by
  ``s₀ = √(anchor² / D + eps)``: each reads ``x_c · s₀ / s``, θ*'s input shrunk by ``(1 + |x_c|² / anchor²)^(−½)``
  (about). Anything written anywhere, the junk too, moves ``s``: every writer affects the output.
* ``plant_distractors``, ``dormant`` heads: their values read only the first junk dimension, which the read-in fills
  from the prompt's current-value column, 0 in every prompt (the value row is what the heads write), so their
  output is exactly 0 whatever their large ``W_O`` writes into the circuit; ``closed_units``: ReLU units whose bias
  ``-CLOSED_BIAS`` keeps them shut on every prompt, their large ``W_out`` into the circuit. Weights alone rank both
  high; no forward pass sees them do anything. ``disguised`` cancelling pairs: the second head's Q, K and V rows of
  that same dimension are random, so its scores and values on every prompt are the first head's (the dimension
  holds 0) while no two heads have the same weights: their writes cancel exactly, and a reader that pairs heads by
  equal weights finds no pair.
* ``plant_null_paths``, *relays*: layer l's writer reads only the features (rows no head writes, and no causal
  variable: interchanging the reward or the value leaves it alone) and writes ``w`` along ``e_target + e_current``.
  θ*'s readers cannot see that direction: its values read ``R + t − v`` (``1 − 1 = 0``), its queries only the
  features (its keys read it, against query rows that are 0 there). Layer l + 1's eraser has the writer's Q, K and
  V, plus random rows along the always-zero dimension, and ``−W_O``: the same input rows, the same output, negated,
  so the two sum to 0 (to rounding) before the read-out sees them, while each alone moves the output. *Broadcast*
  heads: ``W_Q`` reads only dimensions that hold the same value at every position (the always-zero one, the
  broadcast ones), so with the bias ``b_Q`` every position asks the same query, gets the same pattern (chosen by the
  keys' content) and writes the same vector. The later TD heads' keys read the broadcast dimensions into their
  feature rows: a key term ``c`` common to every key adds ``q_j · c`` to every score of row ``j``, and softmax
  ignores a shift of a whole row.
* ``entangle_units``: units ``2k`` and ``2k + 1`` fire together (their pre-activations are equal on every prompt) and
  their ``W_out`` rows are ``a_k ± n_k``: the pair writes ``2 a_k`` times the shared activation, each unit alone
  points elsewhere (its docstring).
* ``rotate``: the change of residual basis ``x → x Q``: writers right-multiplied by ``Q``, readers left by ``Qᵀ``.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.analyses.methods_benchmark.case_specs import CaseSpec
from ictd_interp.analyses.methods_benchmark.graph import OUTPUT, Edge, head_name
from ictd_interp.tasks.prompt import PromptLayout

LN_EPS = 1e-5  # the standard architecture's LayerNorm eps
DORMANT_SCALE = 4.0  # the dormant heads' and shut units' weights: larger than the circuit's own
CLOSED_BIAS = 1e3  # a shut unit's bias: far below any pre-activation these prompts give (|x| < 10, |W_in| ~ 1)


def random_rotation(n: int, generator: torch.Generator) -> Float[Tensor, "n n"]:
    """A Haar-random orthogonal matrix (QR of a Gaussian, signs fixed by R's diagonal)."""
    q, r = torch.linalg.qr(torch.randn(n, n, generator=generator, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))


def mean_fixing_rotation(n: int, generator: torch.Generator, rotate: bool) -> Float[Tensor, "n n"]:
    """An orthogonal ``Q`` whose last row is the unit all-ones vector: the Householder reflection taking ``e_{n−1}``
    to ``1/√n``, after a Haar rotation of the first ``n − 1`` coordinates when ``rotate``. A vector with a 0 last
    coordinate maps to one whose mean is 0."""
    ones = torch.full((n,), 1 / math.sqrt(n), dtype=torch.float64)
    w = torch.zeros(n, dtype=torch.float64)
    w[-1] = 1.0
    w = w - ones
    householder = torch.eye(n, dtype=torch.float64) - 2 * torch.outer(w, w) / (w @ w)
    inner = torch.eye(n, dtype=torch.float64)
    if rotate:
        inner[:-1, :-1] = random_rotation(n - 1, generator)
    return inner @ householder


def split_td_head(weights: dict[str, Tensor], n_layers: int, current: int) -> None:
    """Head 0's update split between heads 0 and 1 by the value row ``current`` they read (module docstring)."""
    for layer in range(n_layers):
        attn = f"blocks.{layer}.attn"
        for name in ("W_Q", "W_K", "W_O"):
            weights[f"{attn}.{name}"][1] = weights[f"{attn}.{name}"][0]
        W_V = weights[f"{attn}.W_V"]
        W_V[1] = 0.0
        W_V[1, current] = W_V[0, current]
        W_V[0, current] = 0.0


def plant_distractors(spec: CaseSpec, weights: dict[str, Tensor], generator: torch.Generator) -> None:
    """Fill the distractors' weights in the unrotated basis (first ``d + 3`` dimensions: the circuit's,
    the next ``junk_dims`` junk): each layer's heads by role (``_plant_head``), then its MLP (``_plant_mlp``), drawn
    in that order from ``generator``."""
    s = spec.weight_scale
    randn = lambda *shape: s * torch.randn(*shape, generator=generator, dtype=torch.float64)  # noqa: E731
    roles = spec.roles
    first_cancelling = roles.index("cancelling") if "cancelling" in roles else 0
    for layer in range(spec.n_layers):
        for h, role in enumerate(roles):
            if role in NULL_PATH_ROLES + ("td", "td-value") or (role == "cancelling" and (h - first_cancelling) % 2):
                continue  # the circuit's own heads, and each cancelling pair's second (its first sets both)
            _plant_head(spec, weights, f"blocks.{layer}.attn", h, role, randn)
        if spec.d_mlp:
            _plant_mlp(spec, weights, f"blocks.{layer}.mlp", randn)
    if spec.zero_dimension:  # the read-in fills that dimension from the always-zero value column
        weights["embed.W_E"][PromptLayout(spec.d_features).current, spec.d_features + 3] = DORMANT_SCALE


def _plant_head(spec: CaseSpec, weights: dict[str, Tensor], attn: str, h: int, role: str, randn) -> None:
    """Head ``h`` of block ``attn`` as its role says: random Q, K, V, then its output by role."""
    m, s = spec.d_features + 3, spec.weight_scale
    W_O = weights[f"{attn}.W_O"]
    for name in ("W_Q", "W_K", "W_V"):
        weights[f"{attn}.{name}"][h] = randn(*weights[f"{attn}.{name}"][h].shape)
    if role == "junk":
        W_O[h, :, m : m + spec.junk_dims] = randn(W_O.shape[1], spec.junk_dims)
    elif role == "leak":  # the k-th leak head (k = 1, 2, ...) at leak_scale · k / leak_heads
        k = h - (spec.n_heads - spec.leak_heads) + 1
        W_O[h, :, :m] = spec.leak_scale * k / spec.leak_heads * randn(W_O.shape[1], m) / s
    elif role == "cancelling":
        W_O[h, :, :m] = randn(W_O.shape[1], m)
        for name in ("W_Q", "W_K", "W_V"):
            weights[f"{attn}.{name}"][h + 1] = weights[f"{attn}.{name}"][h]
            if spec.disguised:  # a row the data never reaches: the same output, other weights
                row = weights[f"{attn}.{name}"][h + 1, m]
                row += DORMANT_SCALE * randn(row.shape[-1]) / s
        W_O[h + 1] = -W_O[h]
    elif role == "dormant":  # its values read the dormant dimension alone; it writes into the circuit
        weights[f"{attn}.W_V"][h] = 0.0
        weights[f"{attn}.W_V"][h, m] = DORMANT_SCALE * randn(weights[f"{attn}.W_V"].shape[-1]) / s
        W_O[h, :, :m] = DORMANT_SCALE * randn(W_O.shape[1], m) / s


def _plant_mlp(spec: CaseSpec, weights: dict[str, Tensor], mlp: str, randn) -> None:
    """Block ``mlp``'s units: random, writing into the junk dimensions; shut ones also write into the circuit."""
    m, s = spec.d_features + 3, spec.weight_scale
    weights[f"{mlp}.W_in"] = randn(*weights[f"{mlp}.W_in"].shape)
    weights[f"{mlp}.b_in"] = randn(spec.d_mlp)
    weights[f"{mlp}.W_out"][:, m : m + spec.junk_dims] = randn(spec.d_mlp, spec.junk_dims)
    if spec.closed_units:  # shut: a bias far below any pre-activation, writes into the circuit
        weights[f"{mlp}.b_in"] = torch.full((spec.d_mlp,), -CLOSED_BIAS, dtype=torch.float64)
        weights[f"{mlp}.W_out"][:, :m] = DORMANT_SCALE * randn(spec.d_mlp, m) / s


ENTANGLE_SCALE = 3.0  # an entangled unit's write off its feature, against the feature's own


def entangle_units(spec: CaseSpec, weights: dict[str, Tensor], generator: torch.Generator) -> None:
    """Units ``2k`` and ``2k + 1`` of each block become one feature: the same ``W_in`` column and bias but for
    the always-zero row ``m`` (0 on every prompt: the same pre-activation, so they fire together), ``W_out`` rows
    ``a_k ± n_k`` in the junk dimensions after ``m`` with ``|n_k| ≈ ENTANGLE_SCALE |a_k|``: their writes sum to
    ``2 a_k`` times the shared activation, while each row points far from ``a_k``."""
    m, s = spec.d_features + 3, spec.weight_scale
    written = slice(m + 1, m + spec.junk_dims)
    randn = lambda *shape: s * torch.randn(*shape, generator=generator, dtype=torch.float64)  # noqa: E731
    for layer in range(spec.n_layers):
        W_in, b_in, W_out = (weights[f"blocks.{layer}.mlp.{name}"] for name in ("W_in", "b_in", "W_out"))
        W_in[:, 1::2], b_in[1::2] = W_in[:, 0::2], b_in[0::2]
        W_in[m, 1::2] += DORMANT_SCALE * randn(spec.d_mlp // 2) / s
        a, n = randn(spec.d_mlp // 2, spec.junk_dims - 1), ENTANGLE_SCALE * randn(spec.d_mlp // 2, spec.junk_dims - 1)
        W_out[:, m] = 0.0
        W_out[0::2, written], W_out[1::2, written] = a + n, a - n


def feature_writes(spec: CaseSpec, W_out: Float[Tensor, "unit d_model"]) -> Float[Tensor, "feature d_model"]:
    """A block's planted features' unit write directions: its units' ``W_out`` rows, or, entangled, each pair's
    sum."""
    writes = W_out[0::2] + W_out[1::2] if spec.entangled else W_out
    return writes / writes.norm(dim=-1, keepdim=True)


NULL_PATH_ROLES = ("relay-write", "relay-erase", "broadcast")


def plant_null_paths(spec: CaseSpec, weights: dict[str, Tensor], generator: torch.Generator) -> None:
    """Relays and broadcast heads (module docstring), in the unrotated basis: both read the features, rows no
    head writes and no causal variable, so a later head given the same weights computes the same output."""
    fixed, broadcast = PromptLayout(spec.d_features).features, _broadcast_rows(spec)
    randn = lambda *shape: spec.weight_scale * torch.randn(*shape, generator=generator, dtype=torch.float64)  # noqa: E731
    plant = {"relay-write": _relay_write, "relay-erase": _relay_erase, "broadcast": _broadcast}
    for layer in range(spec.n_layers):
        attn = lambda name, layer=layer: weights[f"blocks.{layer}.attn.{name}"]  # noqa: E731
        for h, role in enumerate(spec.roles):
            if role not in NULL_PATH_ROLES:
                continue
            for name in ("W_Q", "W_K", "W_V"):
                attn(name)[h, fixed] = randn(fixed.stop, attn(name).shape[-1])
            plant[role](spec, weights, layer, h, randn)
        if spec.broadcast_heads:  # the TD head's keys read the broadcast dimensions, in its query's feature rows
            attn("W_K")[0, broadcast, : spec.d_features] = (
                DORMANT_SCALE * randn(spec.junk_dims - 1, spec.d_features) / spec.weight_scale
            )


def _broadcast_rows(spec: CaseSpec) -> slice:
    """The residual rows the broadcast heads write and read: the junk dimensions after the anchor's."""
    m = spec.d_features + 3
    return slice(m + 1, m + spec.junk_dims)


def _relay_write(spec: CaseSpec, weights: dict[str, Tensor], layer: int, h: int, randn) -> None:
    """A dormant write of ``t + v``, which the TD heads' readers cannot see (none on the last layer)."""
    if layer + 1 < spec.n_layers:
        layout, W_O = PromptLayout(spec.d_features), weights[f"blocks.{layer}.attn.W_O"]
        write = DORMANT_SCALE * randn(W_O.shape[1]) / spec.weight_scale
        W_O[h, :, layout.target] = write
        W_O[h, :, layout.current] = write


def _relay_erase(spec: CaseSpec, weights: dict[str, Tensor], layer: int, h: int, randn) -> None:
    """The previous layer's relay writer, disguised, its write negated (none on the first layer)."""
    if layer == 0:
        return
    m, writer = spec.d_features + 3, spec.roles.index("relay-write")
    attn = lambda at, name: weights[f"blocks.{at}.attn.{name}"]  # noqa: E731
    for name in ("W_Q", "W_K", "W_V"):
        attn(layer, name)[h] = attn(layer - 1, name)[writer]
        attn(layer, name)[h, m] += DORMANT_SCALE * randn(attn(layer, name).shape[-1]) / spec.weight_scale
    attn(layer, "W_O")[h] = -attn(layer - 1, "W_O")[writer]


def _broadcast(spec: CaseSpec, weights: dict[str, Tensor], layer: int, h: int, randn) -> None:
    """One query from every position: the same pattern and the same write everywhere, reading the broadcasts so
    far (the same at every position too)."""
    m, s, broadcast = spec.d_features + 3, spec.weight_scale, _broadcast_rows(spec)
    attn = lambda name: weights[f"blocks.{layer}.attn.{name}"]  # noqa: E731
    attn("W_Q")[h] = 0.0
    attn("W_Q")[h, m] = DORMANT_SCALE * randn(attn("W_Q").shape[-1]) / s
    weights[f"blocks.{layer}.attn.b_Q"][h] = randn(attn("W_Q").shape[-1]) / s
    for name in ("W_Q", "W_K", "W_V"):
        attn(name)[h, broadcast] = DORMANT_SCALE * randn(spec.junk_dims - 1, attn(name).shape[-1]) / s
    attn("W_O")[h, :, broadcast] = randn(attn("W_O").shape[1], spec.junk_dims - 1)


def anchor_layer_norm(spec: CaseSpec, weights: dict[str, Tensor], d_model: int) -> None:
    """The read-in bias ``anchor`` in the anchor dimension (second to last), and the TD heads' readers and the
    read-out multiplied by ``s₀`` (module docstring)."""
    weights["embed.b_E"][d_model - 2] = spec.anchor
    s0 = math.sqrt(spec.anchor**2 / d_model + LN_EPS)
    for layer in range(spec.n_layers):
        for name in ("W_Q", "W_K", "W_V"):
            weights[f"blocks.{layer}.attn.{name}"][: spec.td_heads] *= s0
    weights["unembed.W_U"] *= s0


def rotate(weights: dict[str, Tensor], Q: Float[Tensor, "d_model d_model"]) -> None:
    """The change of residual basis ``x → x Q``: writers right-multiplied by ``Q``, readers left by ``Qᵀ``."""
    for name, w in weights.items():
        leaf = name.rsplit(".", 1)[-1]
        if leaf in ("W_E", "b_E", "W_pos", "W_O", "b_O", "W_out", "b_out"):
            weights[name] = w @ Q
        elif leaf in ("W_Q", "W_K", "W_V", "W_in", "W_U"):
            weights[name] = Q.T @ w


def circuit_edges(spec: CaseSpec) -> frozenset[Edge]:
    """The planted circuit: read-in → every TD head, every TD head → every later TD head and → the output. Split:
    the reward heads (head 0) read only the read-in; the value heads (head 1) read every earlier TD head's value;
    the first layer's value head, which writes nothing, is not in it."""
    td = [head_name(layer, 0) for layer in range(spec.n_layers)]
    if not spec.split_td:
        edges = {("embed", v) for v in td} | {(u, OUTPUT) for u in td}
        return frozenset(edges | {(td[a], td[b]) for a in range(spec.n_layers) for b in range(a + 1, spec.n_layers)})
    live = [head_name(layer, 1) for layer in range(1, spec.n_layers)]  # value heads of layers 1, 2, ...
    edges = {("embed", v) for v in td + live} | {(u, OUTPUT) for u in td + live}
    edges |= {(td[a], live[b - 1]) for a in range(spec.n_layers) for b in range(a + 1, spec.n_layers)}
    return frozenset(edges | {(live[a], live[b]) for a in range(len(live)) for b in range(a + 1, len(live))})
