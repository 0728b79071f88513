"""The claims report (``ictd-interp claims``): every claim of the paper and this project's findings re-derived
with intervals and a verdict by a stated rule. ``claim`` (the row), ``budget`` (quick / full), ``theory`` (θ* alone:
Theorems 1-2, Assumption 5.1), ``neu_limit`` (Theorem 3), ``control_rows`` (θ* running SARSA, expected SARSA and
softmax Q-learning), ``trained`` and ``findings`` (the paper's claims and this project's findings, from the studies
it runs), ``claim_figures`` (figures from the rows' data, read by ``figure_data``), ``claims_md`` (claims.md/json),
``run`` (the resumable orchestration on Ray). The top layer of ``analyses``: it imports ``studies``, ``analyze``
(one model analysed), ``summary``, ``metrics`` and ``figures``, ``hooks`` (the control backups), and the core's
``config``, ``io`` (its output folder, progress bars), ``tasks``, ``models`` and ``reference``. Names are imported on
first use.
"""

from ictd_interp._lazy import lazy_exports

_EXPORTS = {
    "Claim": "claim",
    "conditional": "claim",
    "thresholds": "claim",
    "Budget": "budget",
    "theorem1": "theory",
    "assumption": "theory",
    "theorem2": "theory",
    "theorem3": "neu_limit",
    "weights": "trained",
    "diagonality": "trained",
    "signature": "trained",
    "iterated": "findings",
    "constant_baseline": "findings",
    "depth_sampling": "findings",
    "same_state_head": "findings",
    "draw": "claim_figures",
    "table": "claims_md",
    "write_claims": "claims_md",
    "run_claims": "run",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
