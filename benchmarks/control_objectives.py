"""Which action values does each control objective teach? Models trained with the control-quick preset under
``td`` (SARSA), ``q-learning`` and ``supervised-q-star`` are read on the same fresh tasks of that preset's family:
the query's value against ``q_π`` of the behaviour and against ``q*``, and the greedy regret of the model's in-context
action values, each paired task by task with the SARSA-trained model's.

    ictd-interp train --preset control-quick --objective OBJ --seed 0 --threads 1 --out runs/control-OBJ
    python benchmarks/control_objectives.py runs/control-td runs/control-q-learning runs/control-supervised-q-star

Prints JSON: per model, the mean squared error of the query's value against q_π and q* (over tasks, with a t
interval), the greedy regret, and each against the first model's, task by task
(``ictd_interp.analyses.metrics.intervals``).
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from ictd_interp.analyses.analyze import resolve
from ictd_interp.analyses.metrics.acting import acting_regret, in_context_q
from ictd_interp.analyses.metrics.intervals import paired, t_interval
from ictd_interp.config.train import PRESETS
from ictd_interp.tasks.mdp import random_mdps, uniform_policy
from ictd_interp.tasks.sampling import sample_from

SEED = 29


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run folders, checkpoints or shipped models (the first: the reference)")
    parser.add_argument("--tasks", type=int, default=256)
    args = parser.parse_args()
    dist = PRESETS["control-quick"].tasks
    gen = torch.Generator().manual_seed(SEED)
    mdp = random_mdps(args.tasks, dist.n_states, dist.n_actions, dist.gamma, generator=gen)
    behaviour = uniform_policy(dist.n_states, dist.n_actions)
    tasks = sample_from(dist, args.tasks, generator=gen, mrp=mdp.pair_mrp(behaviour))
    query = tasks.states[:, -1:]
    truth = {"q_pi": mdp.q_values(behaviour).flatten(-2), "q_star": mdp.q_star().flatten(-2)}
    errors, estimates = {}, {}
    for run in args.runs:
        model = resolve(run).model.double()  # a run folder, a checkpoint or a shipped model's name
        with torch.no_grad():
            v = model(tasks.prompt.double())[:, -1]
        errors[run] = {name: (v - torch.gather(t, 1, query)[:, 0]).pow(2).numpy() for name, t in truth.items()}
        estimates[run] = in_context_q(model, tasks, dist.n_actions)
    act = acting_regret(mdp, tasks, behaviour, estimates, baseline=args.runs[0])
    first = args.runs[0]
    out = {
        "tasks": args.tasks,
        "seed": SEED,
        "family": dist.family,
        "reference": first,
        "models": {
            run: {
                **{f"sq_error_vs_{n}": t_interval(e).to_dict() for n, e in errors[run].items()},
                "greedy_regret": act.regret[run].to_dict(),
                **(
                    {}
                    if run == first
                    else {
                        **{
                            f"sq_error_vs_{n}_minus_reference": paired(e, errors[first][n]).to_dict()
                            for n, e in errors[run].items()
                        },
                        "regret_minus_reference": act.versus[run].to_dict(),
                    }
                ),
            }
            for run in args.runs
        },
        "behaviour_regret": act.regret["behaviour"].to_dict(),
    }
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
