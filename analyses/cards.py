"""The shipped models' verdicts: each model's card carries its function-space verdict (``in_context``, docs/theory.md
§7a) on its own evaluation tasks (a stylised model's last layer read from its weights; another architecture's effective
discount is left to ``analyze``, which fits it), and a preset's models are shipped with it.

    python -m ictd_interp.analyses.cards verdicts            # recompute every card's verdict
    python -m ictd_interp.analyses.cards ship quick 0 1 2    # train the quick preset's seeds into quick-td-s<seed>,
    with verdicts python -m ictd_interp.analyses.cards ship quick 0 --kind mc --set objective=mc   # a null model:
    quick-mc-s0
    python -m ictd_interp.analyses.cards ship deep-long 0 1 2 --amplifying --runs \
        'STUDY/cells/recipe-depth-96__seed-{seed}/run'     # a study's finished runs of the same config, as they are
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

import torch

from ictd_interp.analyses.analyze import resolve
from ictd_interp.analyses.metrics import baselines, in_context, ladder
from ictd_interp.analyses.metrics.algorithm_id import read_layer
from ictd_interp.analyses.metrics.theta_star_limit import theta_star_rows
from ictd_interp.config.train import TrainConfig
from ictd_interp.io.pretrained import CARD, PRETRAINED_DIR, card, names
from ictd_interp.models.registry import holds_theta_star
from ictd_interp.models.stylised.state_space import state_space_unavailable
from ictd_interp.training.evaluation import EvalSet
from ictd_interp.training.retraining import AMPLIFYING_RTOL, CROSS_MACHINE_RTOL, reexport


@torch.no_grad()
def verdict(name: str) -> dict[str, Any]:
    """The card's ``in_context`` entry of a shipped stylised model: the verdict and the numbers it rests on."""
    model, config, _, _ = resolve(name)
    tasks = EvalSet.build(replace(config, device="cpu")).tasks
    exact = holds_theta_star(model) and state_space_unavailable(model.cfg) is None
    # θ* beside it where θ* is a point of its weights; its last layer read exactly from them
    extra = theta_star_rows(model.cfg, tasks) if exact else {}
    base = baselines.compare(model(tasks.prompt), tasks, config.tasks.gamma, model.cfg.n_layers, extra=extra)
    last = read_layer(model, model.cfg.n_layers - 1) if exact else None  # other models: `analyze` fits it
    found = in_context.assess(model, tasks, base, last, config.tasks, config.eval_seed)
    versus = {name: base.estimators[name].model_minus_baseline.difference for name in baselines.REQUIRED}
    return {
        "learns_in_context": found.learns_in_context,
        "verdict": found.verdict,
        "msve": found.msve.mean,
        "msve_interval": [found.msve.lo, found.msve.hi],
        "minus": {name: [d.mean, d.lo, d.hi] for name, d in versus.items()},  # model − baseline, paired 95% t
        "best_baseline": found.best_baseline,
        "best_baseline_msve": found.best_baseline_msve,
        "effective_discount": found.discount.value,
        "iterated_4x": found.iterated.verdict,
        "n_tasks": base.n_tasks,
        "rule": found.rule,
        "level": found.level,
        "ladder": _ladder_card(found.ladder),
    }


def _ladder_card(lad: ladder.Ladder) -> dict[str, Any]:
    """The card's ladder: the conditions, and per context length the model's MSVE at each depth beside every
    estimator's (the numbers ``ictd-interp models --long`` prints)."""
    return {
        "level": lad.level,
        **{k: getattr(lad, k) for k in ("beats_mc", "flat_with_depth", "falls_with_context", "near_ce")},
        "n_tasks": lad.n_tasks,
        "rungs": [
            {
                "n": r.n,
                "depths": r.depths,
                "msve": [i.mean for i in r.msve],
                **{name: i.mean for name, i in r.estimators.items()},
                **{
                    key: getattr(r, key).mean
                    for key in ("gap_closed", "gap_closed_deepest", "gap_closed_ce")
                    if getattr(r, key) is not None
                },
            }
            for r in lad.rungs
        ],
        "rule": lad.rule,
    }


def write_verdict(name: str) -> dict[str, Any]:
    path = PRETRAINED_DIR / name / CARD
    entry = json.loads(path.read_text())
    entry["in_context"] = verdict(name)
    path.write_text(json.dumps(entry, indent=1))
    return entry["in_context"]


def ship(
    preset: str,
    seed: int,
    name: str,
    description: str,
    run: Optional[Path] = None,
    rtol: float = CROSS_MACHINE_RTOL,
    **settings: Any,
) -> dict[str, Any]:
    """Train ``preset`` with flat ``settings`` at ``seed`` (one thread, as every card) into the shipped folder
    ``name``, then its verdict; ``run``: a finished run of exactly that config on this machine (a study's cell),
    taken instead of training again; ``rtol``: the card's cross-machine tolerance (``AMPLIFYING_RTOL`` for the deep
    recipes, ``ictd_interp.training.retraining``)."""
    folder = PRETRAINED_DIR / name
    folder.mkdir(exist_ok=True)
    config = TrainConfig.from_preset(preset, seed=seed, **settings)
    flags = "".join(
        f" --{key.replace('_', '-')}" + ("" if value is True else f" {value}") for key, value in settings.items()
    )
    (folder / CARD).write_text(
        json.dumps(
            {
                "name": name,
                "description": description,
                "command": f"ictd-interp train --preset {preset}{flags} --seed {seed} --threads 1 --out DIR",
                "train_config": config.to_dict(),
                "cross_machine_rtol": rtol,
                "fingerprint": {"threads": 1},
            },
            indent=1,
        )
    )  # the thread count it trains at; reexport records the rest
    if run is not None:
        reexport(folder, run, trained=True)
    else:
        with tempfile.TemporaryDirectory() as work:
            reexport(folder, Path(work) / "run")
    write_verdict(name)
    return card(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("verdicts")
    p = sub.add_parser("ship")
    p.add_argument("preset")
    p.add_argument("seeds", type=int, nargs="+")
    p.add_argument("--description", default=None)
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="flat settings (objective=mc, ...)")
    p.add_argument("--kind", default="td", help="the name's middle part: PRESET-KIND-sSEED")
    p.add_argument("--runs", default=None, help="finished runs of these seeds to take, a path with {seed}")
    p.add_argument("--amplifying", action="store_true", help="a deep recipe: the card's tolerance is AMPLIFYING_RTOL")
    args = parser.parse_args()
    if args.what == "verdicts":
        for name in names():
            print(name, write_verdict(name)["verdict"])
        return
    settings = dict(_setting(item) for item in args.set)
    for seed in args.seeds:
        name = f"{args.preset}-{args.kind}-s{seed}"
        text = f"{args.description or f'{args.preset} preset (semi-gradient TD)'}, seed {seed}"
        run = None if args.runs is None else Path(args.runs.format(seed=seed))
        rtol = AMPLIFYING_RTOL if args.amplifying else CROSS_MACHINE_RTOL
        print(name, ship(args.preset, seed, name, text, run, rtol, **settings)["in_context"]["verdict"])


def _setting(item: str) -> tuple[str, Any]:
    key, _, value = item.partition("=")
    return key, {"true": True, "false": False}.get(value.lower(), value)


if __name__ == "__main__":
    main()
