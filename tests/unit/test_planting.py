"""The planting steps derived in ``analyses/methods_benchmark/planting.py``, checked on the cases built with them."""

import math

import pytest
import torch

from ictd_interp.analyses.methods_benchmark.case_specs import CASES, CaseSpec
from ictd_interp.analyses.methods_benchmark.cases import build_case, circuit_source, problem_of
from ictd_interp.analyses.methods_benchmark.faithfulness import EPSILON, circuit_check
from ictd_interp.analyses.methods_benchmark.graph import OUTPUT
from ictd_interp.analyses.methods_benchmark.methods import edge_patching
from ictd_interp.analyses.methods_benchmark.planting import mean_fixing_rotation
from ictd_interp.analyses.metrics.site_probes import residual_stack
from ictd_interp.models.standard.theta_star import standard_theta_star


def test_the_split_update_has_exactly_the_derived_edges():
    """Reward heads read only the read-in; the first value head writes nothing: every other edge has no effect
    at all, every derived one a clear effect, and the derived edges are a circuit at ε."""
    case = build_case(CASES["split"], 0)
    effects = edge_patching(problem_of(case)).scores
    true = case.truth.edges
    assert len(true) == 3 + 2 + 3 + 2 + 3 + 1  # embed→6−1 heads, 5 → output, reward→later value, value→value
    assert max(v for e, v in effects.items() if e not in true) <= 1e-12
    assert min(effects[e] for e in true) > 1e-2
    assert effects[("a0.h0", "a1.h0")] <= 1e-12 and effects[("a0.h1", OUTPUT)] <= 1e-12
    joint, less_one = circuit_check(case)
    assert joint == pytest.approx(1.0, abs=1e-12) and less_one < 1 - EPSILON
    with pytest.raises(ValueError, match="split_td splits θ\\*'s head"):
        CaseSpec("x", split_td=True, d_features=4, source="depth3-td-s{k}")


def test_the_mean_fixing_rotation_is_orthogonal_and_centres_what_it_carries():
    Q = mean_fixing_rotation(7, torch.Generator().manual_seed(0), rotate=True)
    assert (Q @ Q.T - torch.eye(7, dtype=torch.float64)).abs().max() <= 1e-14
    assert (Q[-1] - 1 / math.sqrt(7)).abs().max() <= 1e-15
    x = torch.randn(5, 7, dtype=torch.float64)
    x[:, -1] = 0.0
    assert (x @ Q).mean(-1).abs().max() <= 1e-15


def test_layer_norm_is_held_near_theta_star_by_the_anchor_and_the_junk_moves_the_norm():
    """Centring is the identity at every site; the distance to θ*'s circuit falls about as 1/anchor²; the
    planted edges are a circuit at ε while every junk head's write has a small, non-zero effect."""
    case = build_case(CASES["layernorm"], 0)
    assert residual_stack(case.model, case.clean.prompt).mean(-1).abs().max() <= 1e-12
    plain = standard_theta_star(circuit_source(case.spec, 0))
    bare = {}
    for anchor in (16.0, 64.0):
        model = build_case(CaseSpec("ln", layer_norm=True, anchor=anchor), 0).model
        bare[anchor] = (model(case.clean.prompt) - plain(case.clean.prompt)).abs().max().item()
    assert 8 < bare[16.0] / bare[64.0] < 32 and bare[64.0] < 1e-3
    joint, less_one = circuit_check(case)
    assert 1 - EPSILON <= joint < 1 - 1e-4 and less_one < 1 - EPSILON
    effects = edge_patching(problem_of(case)).scores
    junk = [e for e in effects if case.truth.roles.get(e[0]) in ("junk", "mlp-junk") and e[1] == OUTPUT]
    assert len(junk) == 3 * 3 and min(effects[e] for e in junk) > 1e-6
    assert max(effects[e] for e in junk) < min(effects[e] for e in case.truth.edges)
    with pytest.raises(ValueError, match="layer_norm needs an anchor > 0"):
        CaseSpec("x", layer_norm=True)


def test_dormant_heads_and_shut_units_weigh_much_and_do_nothing():
    """Their edges carry large weights (the weight reader ranks them above the circuit's: AUROC below 0.5 at
    seeds 0-2) and exactly no effect on any prompt (every edge but the planted ones patches to <= 1e-12), so
    exact patching recovers the circuit and the planted edges are a circuit at ε."""
    from ictd_interp.analyses.methods_benchmark.scores import auroc
    from ictd_interp.analyses.methods_benchmark.weight_reader import weight_scores

    for seed in range(3):
        case = build_case(CASES["dormant"], seed)
        effects = edge_patching(problem_of(case)).scores
        true = case.truth.edges
        assert max(v for e, v in effects.items() if e not in true) <= 1e-12
        assert min(effects[e] for e in true) > 1e-2
        dormant = [e for e in effects if "dormant" in (case.truth.roles.get(e[0]), case.truth.roles.get(e[1]))]
        shut = [e for e in effects if case.truth.roles.get(e[0]) == "mlp-junk"]
        assert len(dormant) > 0 and len(shut) > 0
        weights = weight_scores(case.model)
        assert max(weights[e] for e in dormant + shut) > max(weights[e] for e in true)
        assert auroc(weights, true) < 0.4
        joint, less_one = circuit_check(case)
        assert joint == pytest.approx(1.0, abs=1e-12) and less_one < 1 - EPSILON
    with pytest.raises(ValueError, match="closed_units needs d_mlp >= 1"):
        CaseSpec("x", closed_units=True, junk_dims=1)


@pytest.mark.parametrize("case_name", ["disguised", "trained-disguised"])
def test_disguised_pairs_cancel_exactly_and_share_no_weights(case_name):
    """Each layer's pair writes opposite outputs on every held-out prompt (their sum ≤ 1e-12 of one alone), while
    no two heads of a layer have equal Q, K or V: pairing heads by equal weights (the reader that solves
    ``cancelling``) finds nothing, and the built-in weight reader ranks the pairs' edges above the circuit's. The
    same around a TD-trained layer."""
    from ictd_interp.analyses.methods_benchmark.scores import auroc
    from ictd_interp.analyses.methods_benchmark.weight_reader import weight_scores

    for seed in range(2):
        case = build_case(CASES[case_name], seed)
        pair = [h for h, role in enumerate(case.spec.roles) if role == "cancelling"]
        _, cache = case.model.run_with_cache(case.held_out.prompt)
        for layer in range(case.spec.n_layers):
            attn = case.model.blocks[layer].attn
            z = cache[f"blocks.{layer}.attn.hook_z"]  # [batch, pos, head, d_head]
            writes = [z[:, :, h] @ attn.W_O[h] for h in pair]
            assert (writes[0] + writes[1]).abs().max() <= 1e-12 * writes[0].abs().max() and writes[0].abs().max() > 0.1
            for name in ("W_Q", "W_K", "W_V"):
                w = getattr(attn, name)
                assert (w[pair[0]] - w[pair[1]]).abs().max() > 0.1  # the weights differ
        assert auroc(weight_scores(case.model), case.truth.edges) < 0.45
    with pytest.raises(ValueError, match="disguised needs cancelling pairs and one junk dimension"):
        CaseSpec("x", cancelling_pairs=1, junk_dims=1, junk_heads=1, disguised=True)


def _head_writes(case, layer: int, heads: list[int]) -> list[torch.Tensor]:
    """Each head's write into the residual stream on the held-out prompts: ``[batch, pos, d_model]``."""
    _, cache = case.model.run_with_cache(case.held_out.prompt, names_filter=f"blocks.{layer}.attn.hook_z")
    z = cache[f"blocks.{layer}.attn.hook_z"]
    return [z[:, :, h] @ case.model.blocks[layer].attn.W_O[h] for h in heads]


def test_a_relay_is_erased_a_layer_later_and_unseen_in_between():
    """Layer l's writer and layer l + 1's eraser sum to ≤ 1e-12 of the write on held-out prompts; θ*'s readers
    send the write's direction (target + current value) to exactly 0, so in between nothing reads it; zeroing
    both leaves the output, zeroing the writers alone moves it. Single-edge patching and the weight reader rank
    the relays' edges above the circuit's; the false edges that patch to more than 1e-12 are all the relays'."""
    from ictd_interp.analyses.methods_benchmark.scores import auroc
    from ictd_interp.analyses.methods_benchmark.weight_reader import weight_scores

    case = build_case(CASES["relayed"], 0)
    writer, eraser = case.spec.roles.index("relay-write"), case.spec.roles.index("relay-erase")
    for layer in range(case.spec.n_layers - 1):
        write = _head_writes(case, layer, [writer])[0]
        erase = _head_writes(case, layer + 1, [eraser])[0]
        assert (write + erase).abs().max() <= 1e-12 * write.abs().max() and write.abs().max() > 0.5
        direction = case.rotation[case.spec.d_features + 1] + case.rotation[case.spec.d_features + 2]
        assert (write - (write @ direction / 2)[..., None] * direction).abs().max() <= 1e-12 * write.abs().max()
        for later in range(layer + 1, case.spec.n_layers):
            attn = case.model.blocks[later].attn
            td_reads = torch.cat([attn.W_Q[0], attn.W_V[0]], dim=-1)  # its keys meet queries with no such row
            assert (direction @ td_reads).abs().max() <= 1e-12
    prompt, full = case.held_out.prompt, case.model(case.held_out.prompt)
    with torch.no_grad():
        saved = {l: case.model.blocks[l].attn.W_O.clone() for l in range(case.spec.n_layers)}
        for l in range(case.spec.n_layers):
            case.model.blocks[l].attn.W_O[writer] = 0.0
        writers_only = (case.model(prompt) - full).abs().max()
        for l in range(case.spec.n_layers):
            case.model.blocks[l].attn.W_O[eraser] = 0.0
        both = (case.model(prompt) - full).abs().max()
        for l, w in saved.items():
            case.model.blocks[l].attn.W_O.copy_(w)
    assert both <= 1e-12 and writers_only > 0.5
    effects = edge_patching(problem_of(case)).scores
    relays = {head for head, role in case.truth.roles.items() if role.startswith("relay")}
    live = [e for e, v in effects.items() if e not in case.truth.edges and v > 1e-12]
    assert live and all(relays & set(e) for e in live)
    assert auroc(effects, case.truth.edges) < 0.85 and auroc(weight_scores(case.model), case.truth.edges) < 0.8
    from ictd_interp.analyses.methods_benchmark.evaluate import score_method
    from ictd_interp.analyses.methods_benchmark.methods import METHODS

    probe = score_method(METHODS["linear-probe"], case).variables  # the relays read no variable: θ*'s causal model
    assert min(v.iia for v in probe.values()) > 1 - 1e-9  # holds under interchange at every site (IIA 1)
    with pytest.raises(ValueError, match="relays and broadcast heads need θ\\*'s circuit"):
        CaseSpec("x", relayed=True, junk_dims=1, d_features=4, source="depth3-td-s{k}")
    with pytest.raises(ValueError, match="broadcast heads >= 2"):
        CaseSpec("x", broadcast_heads=1, junk_dims=1)


def test_a_broadcast_is_the_same_at_every_position_and_moves_no_score():
    """Each broadcast head writes one vector per prompt, the same at every position (to 1e-13 of it), large; the later
    TD heads' keys read it with weights larger than the circuit's own, and softmax ignores a shift common to every
    key: every edge off the circuit patches to ≤ 1e-12, while the weight reader ranks the broadcasts' edges into
    the TD heads above every true edge."""
    from ictd_interp.analyses.methods_benchmark.scores import auroc
    from ictd_interp.analyses.methods_benchmark.weight_reader import weight_scores

    case = build_case(CASES["broadcast"], 0)
    heads = [h for h, role in enumerate(case.spec.roles) if role == "broadcast"]
    for layer in range(case.spec.n_layers):
        for write in _head_writes(case, layer, heads):
            assert (write - write[:, :1]).abs().max() <= 1e-13 * write.abs().max() and write.abs().max() > 0.1
    effects = edge_patching(problem_of(case)).scores
    assert max(v for e, v in effects.items() if e not in case.truth.edges) <= 1e-12
    assert min(effects[e] for e in case.truth.edges) > 1e-2
    weights = weight_scores(case.model)
    into_keys = [(u, v) for u, v in weights if case.truth.roles[u] == "broadcast" and case.truth.roles.get(v) == "td"]
    assert len(into_keys) == 2 * 3 and min(weights[e] for e in into_keys) > max(weights[e] for e in case.truth.edges)
    assert auroc(weights, case.truth.edges) < 0.7


def test_entangled_features_are_pairs_of_units_and_no_unit_points_along_one():
    """Each feature's two units fire together (equal activations on held-out prompts, ≤ 1e-12) and their writes
    sum along the feature's direction, so the MLP's output is exactly the features times their directions, while
    every unit's own write points far from its feature (mean |cos| ≤ 0.5). The weights-only reader reads the
    features exactly where units are features (``superposed``: its decoder rows are the truth's) and not here."""
    from ictd_interp.analyses.methods_benchmark.cases import feature_values
    from ictd_interp.analyses.methods_benchmark.methods import weight_units

    case = build_case(CASES["entangled"], 0)
    names = [f"blocks.{l}.mlp.hook_post" for l in range(case.spec.n_layers)]
    _, cache = case.model.run_with_cache(case.held_out.prompt, names_filter=lambda n: n in names)
    sites = list(case.truth.features)
    features = feature_values(case, case.held_out)
    for l, block in enumerate(case.model.blocks):
        acts = cache[names[l]].reshape(-1, case.spec.d_mlp)
        assert (acts[:, 0::2] - acts[:, 1::2]).abs().max() <= 1e-12 and (acts > 0).any()
        W_out = block.mlp.W_out.detach()
        written = acts @ W_out
        n = case.spec.d_mlp // 2
        mine = case.truth.features[sites[l]][-n:]  # block l's features come last at its site
        strength = (W_out[0::2] + W_out[1::2]).norm(dim=-1)
        assert (written - (features[sites[l]][:, -n:] * strength) @ mine).abs().max() <= 1e-12
        cos = torch.nn.functional.normalize(W_out, dim=-1) @ mine.T  # [unit, feature]
        assert cos[torch.arange(2 * n), torch.arange(2 * n) // 2].abs().mean() <= 0.5
    found = weight_units(problem_of(case)).decoders[sites[-1]]
    assert ((found @ case.truth.features[sites[-1]].T).abs().max(dim=-1).values < 1 - 1e-6).all()
    superposed = build_case(CASES["superposed"], 0)
    found = weight_units(problem_of(superposed)).decoders
    for site, truth in superposed.truth.features.items():
        assert (found[site] - truth).abs().max() <= 1e-12
    with pytest.raises(ValueError, match="entangled features need mlp_active > 0, an even d_mlp"):
        CaseSpec("x", d_mlp=5, junk_dims=2, mlp_active=0.1, entangled=True)
