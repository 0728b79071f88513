"""The task sets an analysis draws, by name, in one place: each is drawn from the run's evaluation seed plus the
offset named here (the evaluation tasks themselves use the seed as it is), so no analysis takes another's draw by
accident and no offset is written twice. ``theta_star_limit`` and ``probe_fit`` share an offset because they belong
to different architectures' reports (the stylised and the standard), never to the same one; changing any offset
changes every shipped model's report."""

from __future__ import annotations

DRAWS = {
    "long_context": 1,  # error against context length, 64 longer trajectories (every report)
    "theta_star_limit": 2,  # θ*'s computed limit (the stylised report)
    "probe_fit": 2,  # the standard report's probes are fitted on these, apart from the tasks they are scored on
    "acting": 3,  # acting on in-context action values (control tasks)
    "ladder": 4,  # the verdict ladder's tasks, cut to each context length
    "track_probe_fit": 5,  # the checkpoint track's probes are fitted on these (methods_benchmark.checkpoints)
    "readings_long": 6,  # long contexts for the depth-limit reading (metrics.readings): the track and analyze
}


def draw_seed(eval_seed: int, name: str) -> int:
    """The seed of the task set ``name`` (a key of ``DRAWS``) for a run evaluated at ``eval_seed``."""
    if name not in DRAWS:
        raise ValueError(f"draw: unknown task set {name!r}; the named draws are {sorted(DRAWS)}")
    return eval_seed + DRAWS[name]
