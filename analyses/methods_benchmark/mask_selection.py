"""Edge pruning (Bhaskar et al., 2024, "Finding Transformer Circuits with Edge Pruning"), on the graph adapter: every
edge gets a mask ``m = σ(logit)`` in [0, 1] (``graph.run_graph``'s ``keep``: the edge carries ``m`` of its sender's
output and ``1 − m`` of its output on the corrupted prompts), and all masks are trained *jointly* by Adam to keep
the query predictions at the full model's while removing as much as possible:
``loss = mean((p_masked − p_full)² / s²) + λ · mean(m)``, ``s`` the mean |corrupted − full| prediction gap. An edge
that matters only together with another (a cancelling pair) is tested with its partner, which single-edge
patching cannot do. The ranking is the final masks; the circuit, the edges whose mask ends above ½."""

from __future__ import annotations

import torch

from ictd_interp.analyses.methods_benchmark.graph import build_graph, run_graph

STEPS = 300  # Adam steps
LR = 0.1
SPARSITY = 0.05  # λ: the price of keeping an edge, against the squared error in units of the full-corrupted gap


def prune_edges(problem, steps: int = STEPS, lr: float = LR, sparsity: float = SPARSITY):
    """Each edge's final mask (the ranking) and the edges kept (mask > ½), on ``problem``'s clean and corrupted
    prompts."""
    model, clean, corrupted = problem.model, problem.clean.prompt, problem.corrupted.prompt
    edges = build_graph(model).edges
    with torch.no_grad():
        full = run_graph(model, clean)[1]
        corrupted_out, corrupted_pred = run_graph(model, corrupted)
    scale = (corrupted_pred - full).abs().mean().clamp_min(1e-12)
    logits = torch.full((len(edges),), 3.0, dtype=torch.float64, requires_grad=True)  # every edge kept at first
    optimizer = torch.optim.Adam([logits], lr=lr)
    trainable = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        for _ in range(steps):
            masks = torch.sigmoid(logits)
            pred = run_graph(model, clean, keep=(dict(zip(edges, masks)), corrupted_out))[1]
            loss = ((pred - full) / scale).pow(2).mean() + sparsity * masks.mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    finally:
        for p, flag in zip(model.parameters(), trainable):
            p.requires_grad_(flag)
    final = torch.sigmoid(logits.detach()).tolist()
    return dict(zip(edges, final)), frozenset(e for e, m in zip(edges, final) if m > 0.5)
