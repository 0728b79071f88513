"""``ictd-interp construct``'s table: θ*'s sup error against depth on a task distribution, with the margin C of
Assumption 5.1 and the fitted geometric rate (docs/theory.md §5)."""

from __future__ import annotations

from ictd_interp.analyses.metrics.convergence import errors_by_depth, fit_geometric
from ictd_interp.analyses.metrics.diagonality import model_margin
from ictd_interp.config import ICTDConfig, TaskDistribution
from ictd_interp.io.progress import computed
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.tasks import sample_from


def construction_table(model: ICTDConfig, dist: TaskDistribution, n_tasks: int, seed: int, max_depth: int) -> str:
    """The table of ``||v_L - v_pi||_inf`` versus depth for θ* of ``model`` (``ictd-interp construct``), on
    ``n_tasks`` tasks of ``dist``, with the margin ``C``."""
    done: dict = {}
    computed(
        {
            "tasks": lambda: sample_from(dist, n_tasks, seed=seed),
            "theta*": lambda: HookedICTDTransformer.from_theta_star(model),
            "errors by depth": lambda: errors_by_depth(done["theta*"], done["tasks"]).mean(-1),
            "margin C": lambda: model_margin(done["theta*"], done["tasks"]),
        },
        desc="construct",
        into=done,
    )
    errors, C = done["errors by depth"], done["margin C"]
    fit = fit_geometric(errors.tolist())
    depths = [2**k for k in range(max_depth.bit_length()) if 2**k <= max_depth]
    lines = [
        f"theta* ({model.form} form) on {n_tasks} {dist.family} tasks, s={dist.n_states}, n={dist.context_len}, "
        f"{dist.feature_kind} features x{dist.feature_scale}, gamma={dist.gamma}",
        f"Assumption 5.1 margin C: mean {C.mean():.4f}, min {C.min():.4f} "
        f"(holds when 0 < C < (1-gamma)/2 = {(1 - dist.gamma) / 2:.3f}; "
        f"{int((C > 0).sum())}/{len(C)} tasks have C > 0)",
        f"{'depth L':>8}  {'||v_L - v_pi||_inf':>20}",
    ]
    lines += [f"{L:>8}  {errors[L]:>20.6f}" for L in depths]
    lines.append(f"fitted geometric rate {fit.rate:.4f}, floor {fit.floor:.6f}; 1 - C = {1 - C.mean():.4f}")
    return "\n".join(lines)
