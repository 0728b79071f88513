"""The throughput benchmark runs and reports what it promises (a smoke run: one round, one repeat;
its numbers are ratios for a reader, never asserted as timings)."""

import torch

from tests.support.benchmarks import benchmark_module


def test_analytic_flop_counts_worked_out_by_hand():
    bench = benchmark_module()
    # P = 31 positions, d = 4, one head, per layer: scores 2*4*31^2 = 7688, softmax 5*31^2 = 4805,
    # pattern @ value row 2*31^2 = 1922, value row 2*(4+3)*31 = 434 -> 14849; 3 layers, x3 for backward.
    assert bench.flops_per_sample(4, 30, 3) == 3 * 3 * 14849 == 133641
    # standard-quick, per layer: qkv 6*32*32*31 = 190464, scores and pattern @ v 4*32*31*30 = 119040,
    # softmax 5*2*31*30 = 9300, output 2*32*32*31 = 63488, MLP 4*32*64*31 = 253952, GELU 8*64*31 = 15872,
    # LayerNorms 16*32*31 = 15872 -> 667988; read-in 2*7*32*31 = 13888, final LN + read-out 10*32*31 = 9920.
    assert bench.standard_flops_per_sample(4, 30, 3, 32, 2, 16, 64) == 3 * (13888 + 3 * 667988 + 9920) == 6083316


def test_matrix_products_are_recorded_counted_and_replayed_alone():
    products_module = benchmark_module("products")
    f64 = torch.float64
    a, b = torch.randn(3, 4, dtype=f64), torch.randn(4, 5, dtype=f64, requires_grad=True)
    batched = torch.randn(2, 3, 4, dtype=f64)
    with products_module.MatrixProducts() as products:
        out = (a @ b).sum() + (batched @ b).sum() + torch.addmm(torch.ones(5, dtype=f64), a, b).exp().sum()
        out.backward()  # the backward's products too: d b from each of the three
    names = sorted(func.overloadpacket.__name__ for func, _, _ in products.calls)
    assert len(names) == 6 and names.count("addmm") == 1, names
    # forward: a @ b 2*3*4*5 = 120, the batched product 2*(2*3)*4*5 = 240 (as mm or bmm), addmm 120;
    # backward, d b = a^T g: 2*4*3*5 = 120 twice and 2*4*(2*3)*5 = 240 for the batched input
    assert products.flops == 120 + 240 + 120 + 120 + 240 + 120
    first, a_then = products.calls[0][1], a.clone()
    a.add_(1.0)  # the operands are copies: a replay runs the step's own products, not today's tensors
    assert torch.equal(first[0], a_then) and torch.equal(first[1], b.detach())
    products.replay()  # runs outside any mode: nothing more is recorded
    assert len(products.calls) == 6
