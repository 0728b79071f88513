"""The task sets and random draws an analysis makes, by name, in one place: each is drawn from the run's evaluation
seed plus the offset named here (the evaluation tasks themselves use the seed as it is), so no analysis takes
another's draw by accident and no offset is written twice. ``theta_star_limit`` and ``probe_fit`` share an offset
because they belong to different architectures' reports (the stylised and the standard), never to the same one;
changing any offset changes every shipped model's report. NEU's task sets are one per context length
(``context_seed``) and a benchmark case's own draws one per index (``case_seed``)."""

from __future__ import annotations

PER_CONTEXT_LENGTH = {"neu": 0, "neu_zero_closed_form": 1}  # NEU's task sets: one per context length n
PER_CASE = 1000  # a benchmark case's own draws (DAS restarts, SAEs, placebo moves): case seed × this + index

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


def context_seed(seed: int, n: int, name: str) -> int:
    """The seed of NEU's task set ``name`` (a key of ``PER_CONTEXT_LENGTH``) at context length ``n``: a new set of
    tasks at each ``n``, the closed form's apart from the models'."""
    if name not in PER_CONTEXT_LENGTH:
        raise ValueError(f"draw: unknown per-length task set {name!r}; the named ones are {sorted(PER_CONTEXT_LENGTH)}")
    return seed + n + PER_CONTEXT_LENGTH[name]


def case_seed(seed: int, index: int) -> int:
    """The seed of a benchmark case's ``index``-th own draw (a DAS restart, a site's SAE, a placebo move)."""
    return PER_CASE * seed + index
