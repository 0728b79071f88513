"""A method's run, guarded: it gets a ``Problem`` (copies, no ground truth), fails by name when it raises, exits or
edits what it was given, and the process-wide state it may change is put back after it. ``evaluate.score_method``
runs it in the scorer's process; ``isolation.run_method`` in a Ray worker that holds the problem alone."""

from __future__ import annotations

from typing import Optional

import torch

from ictd_interp.analyses.methods_benchmark.cases import Case, Problem, problem_of
from ictd_interp.analyses.methods_benchmark.methods import Method
from ictd_interp.analyses.methods_benchmark.scores import MethodFailed


def guarded(method: Method, case: Case, sealed_seed: Optional[int] = None):
    """``method.run`` on its own ``Problem`` (copies of the model and the task batches, no ground truth). A method
    that raises, or that edits its copies in place (its output would then describe another model or other tasks),
    fails (``MethodFailed``), and so does one that calls ``sys.exit``. The process-wide state a method may change —
    gradient mode, default dtype, torch's, numpy's and Python's random states, the thread count, the deterministic
    flag — is put back after it. It runs in the scorer's process: this guards against accidents and honest
    mistakes, not against a method that searches the process (its frames, the garbage collector) or rebuilds the
    case from the benchmark's own code (docs/methods_benchmark.md, "What a method may read")."""
    saved_state = _process_state()  # first: type checks (beartype, in the tests) draw from Python's random state
    return run_on_problem(method, problem_of(case, sealed_seed), saved_state)


def run_on_problem(method: Method, problem: Problem, saved_state: Optional[tuple] = None):
    """``method.run(problem)`` with the checks ``guarded`` describes (``isolation.run_method`` calls it in a
    process that holds the problem alone)."""
    saved_state = _process_state() if saved_state is None else saved_state
    saved = {k: v.detach().clone() for k, v in problem.model.state_dict().items()}
    prompts = [b.prompt.clone() for b in (problem.clean, problem.corrupted, problem.fit)]
    try:
        output = method.run(problem)
    except (Exception, SystemExit) as err:  # sys.exit in a method fails that method, not the run
        raise MethodFailed(f"method {method.name!r} raised {type(err).__name__}: {err}") from err
    finally:
        _restore(saved_state)
    edited = any(not torch.equal(v, saved[k]) for k, v in problem.model.state_dict().items()) or any(
        not torch.equal(b.prompt, before) for b, before in zip((problem.clean, problem.corrupted, problem.fit), prompts)
    )
    if edited:
        raise MethodFailed(
            f"method {method.name!r} changed its model's weights or its tasks in place; its output is not scored "
            "(the case's own were never handed out)"
        )
    return output


def _process_state() -> tuple:
    """What a method may change for the whole process: gradient mode, default dtype, random states, threads,
    determinism (``_restore`` puts it back)."""
    import random

    import numpy as np

    return (
        torch.is_grad_enabled(),
        torch.get_default_dtype(),
        torch.get_rng_state(),
        np.random.get_state(),
        random.getstate(),
        torch.get_num_threads(),
        torch.are_deterministic_algorithms_enabled(),
    )


def _restore(state: tuple) -> None:
    import random

    import numpy as np

    grad, dtype, rng, np_rng, py_rng, threads, deterministic = state
    torch.set_grad_enabled(grad)
    torch.set_default_dtype(dtype)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(deterministic)
    torch.set_rng_state(rng)  # the random states last: nothing above draws from them after
    np.random.set_state(np_rng)
    random.setstate(py_rng)
