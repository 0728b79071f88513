"""Beyond the paper: θ* runs control algorithms exactly (docs/theory.md §14). One row: on random MDPs, θ* is
softmax SARSA on the state-action chain, and with a backup over action columns (``hooks.control``) expected
SARSA and softmax Q-learning, each layer against the reference iterations (``ictd_interp.reference``)."""

from __future__ import annotations

import torch

from analyses.claims.budget import Budget
from analyses.claims.claim import FAILS, HOLDS, Claim
from analyses.claims.theory import EXACT, GAMMA
from hooks.control import expected_sarsa_hooks, soft_q_hooks
from ictd_interp.config import ICTDConfig
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.reference.control import backup_td, policy_weights, softmax_weights
from ictd_interp.reference.td import softmax_td
from ictd_interp.tasks.action_columns import action_column_prompt
from ictd_interp.tasks.mdp import pair_features, random_mdps, uniform_policy
from ictd_interp.tasks.features import make_features
from ictd_interp.tasks.sampling import control_tasks

N_STATES, D_STATE = 4, 3
BETAS = (1.0, 10.0)


def _features(kind: str, n_actions: int, seed: int) -> torch.Tensor:
    if kind == "onehot":
        return 3.0 * torch.eye(N_STATES * n_actions, dtype=torch.float64)
    states = make_features(N_STATES, D_STATE, "uniform", 1.0, generator=torch.Generator().manual_seed(seed))
    return pair_features(states, n_actions)


def _layer_error(star: HookedICTDTransformer, prompt: torch.Tensor, hooks, reference: torch.Tensor) -> float:
    with star.hooks(fwd_hooks=hooks):
        _, cache = star.run_with_cache(prompt, names_filter=lambda n: n.endswith("hook_resid_post"))
    return max(float((cache["resid_post", l][..., star.layout.current] - reference[:, l + 1]).abs().max())
               for l in range(star.cfg.n_layers))


def constructions(budget: Budget) -> Claim:
    depth, worst, rows = budget.theorem1_depth, {"SARSA": 0.0, "expected SARSA": 0.0, "softmax Q": 0.0}, []
    for n_actions in (2, 3):
        for kind in ("uniform", "onehot"):
            for n in budget.theorem1_lengths:
                mdp = random_mdps(3, N_STATES, n_actions, GAMMA, seed=n)
                tasks = control_tasks(mdp, uniform_policy(N_STATES, n_actions), _features(kind, n_actions, n), n,
                                      seed=n + 1)
                star = HookedICTDTransformer.from_theta_star(ICTDConfig(d_features=tasks.features.shape[-1],
                                                                        n_layers=depth, gamma=GAMMA, dtype="float64"))
                errors = {"SARSA": _layer_error(star, tasks.prompt, [],
                                                softmax_td(tasks.x, tasks.rewards, GAMMA, depth))}
                cols = action_column_prompt(tasks, n_actions)
                x = cols.prompt[..., : tasks.features.shape[-1]]
                pi = torch.softmax(torch.randn(3, N_STATES, n_actions, generator=torch.Generator().manual_seed(n),
                                               dtype=torch.float64), -1)
                ref = backup_td(x, tasks.rewards, cols.next_columns, policy_weights(pi, cols.next_states), GAMMA, depth)
                errors["expected SARSA"] = _layer_error(star, cols.prompt, expected_sarsa_hooks(star, cols, pi), ref)
                errors["softmax Q"] = max(
                    _layer_error(star, cols.prompt, soft_q_hooks(star, cols, beta),
                                 backup_td(x, tasks.rewards, cols.next_columns, softmax_weights(beta), GAMMA, depth))
                    for beta in BETAS)
                rows.append({"actions": n_actions, "kind": kind, "n": n, **errors})
                worst = {k: max(worst[k], errors[k]) for k in worst}
    holds = max(worst.values()) <= EXACT
    return Claim(
        "control_constructions",
        "Beyond the paper: θ* runs softmax-weighted SARSA on the state-action chain, and with a backup over the "
        "next state's action columns in place of the shift, expected SARSA and softmax Q-learning, exactly.",
        f"On {len(rows)} settings (random MDPs of {N_STATES} states × 2 and 3 actions × one-hot (×3) and e_a ⊗ "
        f"uniform state-action features × n ∈ {list(budget.theorem1_lengths)}, 3 tasks each, uniform behaviour), θ* "
        f"({depth} layers, float64) against the reference iterations: `softmax_td` on the pairs (SARSA), "
        f"`reference.control.backup_td` with a random target policy (expected SARSA) and with softmax weights at "
        f"β ∈ {list(BETAS)} (softmax Q-learning); every layer compared.",
        f"holds when the largest absolute difference over every setting, task, column and layer is ≤ {EXACT:g} for "
        "all three algorithms.",
        HOLDS if holds else FAILS,
        [f"{name}: largest |θ* layer l − reference iterate l+1| {err:.1e}" for name, err in worst.items()]
        + ["softmax Q-learning is Q-learning's max backup to within log(a)/β per backup (docs/theory.md §14)"],
        {"worst": worst, "bound": EXACT, "rows": rows})
