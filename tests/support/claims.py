"""Shared by tests/*/test_claims.py."""

from ictd_interp.analyses.claims.budget import Budget

TINY = Budget(
    "tiny",
    theorem1_lengths=(5,),
    theorem1_scales=(1.0,),
    theorem1_depth=3,
    margin_scales=(1.0, 5.0),
    margin_tasks=8,
    limit_lengths=(30, 100),
    limit_tasks=6,
    neu_lengths=(10, 30),
    neu_depths=(1, 3),
    neu_tasks=256,
    seeds=(0, 1),
    steps=30,
    n_eval_tasks=16,
    objectives=("td", "neu"),
    forward="state-space",
    control_objectives=("td",),
    acting_tasks=16,
    deep_models=("deep-td-s0", "deep-td-s1"),
    deep_long_models=("deep-long-td-s0", "deep-long-td-s1"),
    deep_spectral_models=("deep-spectral-td-s0",),
    horizon_models=("deep-g97-384-td-s0", "deep-g97-384-td-s2"),
    extra={"tasks_per_batch": 8, "windows_per_task": 2, "eval_every": 10, "checkpoint_every": 10},
)
