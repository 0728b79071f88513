"""Studies on Ray: tables equal the cells' own files, cells equal standalone runs, faults lose nothing."""

import json

import pandas as pd
import pytest

from ictd_interp.analyses.studies.spec import StudySpecError, load_spec
from tests.support.study import spec


def test_bad_specs_name_the_cell_and_the_field(tmp_path):
    with pytest.raises(StudySpecError, match=r"fixed\.stepz: unknown TrainConfig setting"):
        load_spec(spec(stepz=3))
    with pytest.raises(StudySpecError, match=r"cell objective-tdd__seed-0: objective"):
        load_spec(spec(grid={"objective": ["td", "tdd"]}))
    with pytest.raises(StudySpecError, match=r"grid\.objective: must be a non-empty list"):
        load_spec(spec(grid={"objective": []}))
    with pytest.raises(StudySpecError, match="seeds"):
        load_spec(spec(seeds=[]))
    path = tmp_path / "bad.toml"
    path.write_text('preset = "quick"\nseeds = [0]\n[grid]\nn_layers = [0]\n')
    with pytest.raises(StudySpecError, match=rf"{path}: cell n_layers-0__seed-0: n_layers"):
        load_spec(path)
    with pytest.raises(StudySpecError, match="built-in: \\['architectures', 'atlas-cpu', 'checkpoints', 'depth'"):
        load_spec("no-such-study")
    with pytest.raises(
        StudySpecError,
        match=r"td-gama: no such spec file or built-in study \(built-in: .*\); did you mean 'td-gamma'\?$",
    ):
        load_spec("td-gama")
    with pytest.raises(StudySpecError, match=rf"{tmp_path}: a folder; give a study spec \(a .toml file\)"):
        load_spec(tmp_path)
    assert len(load_spec("objectives").cells()) == 8


def test_a_damaged_results_table_never_replaces_the_report(tmp_path):
    """study-report on a results.csv that no longer lists the study's cells (cut short) is an error naming the
    file; the saved study.md stays."""
    from ictd_interp.analyses.studies.report import write_report

    spec_dict = {"name": "cut", "preset": "quick", "fixed": {}, "grid": {"objective": ["td", "neu"]}, "seeds": [0]}
    (tmp_path / "spec.json").write_text(json.dumps(spec_dict))
    cells = [c.name for c in load_spec(spec_dict).cells()]
    (tmp_path / "results.csv").write_text(f"cell,condition,status,layer\n{cells[0]},objective=td,not started,\n")
    for name in ("curves", "depth", "extrapolation"):
        (tmp_path / f"{name}.csv").write_text("")
    (tmp_path / "study.md").write_text("the saved report")
    says = rf"results.csv: does not list the study's 2 cells \(missing 1, e.g. {cells[1]}"
    with pytest.raises(ValueError, match=says):
        write_report(tmp_path)
    assert (tmp_path / "study.md").read_text() == "the saved report"
    full = "".join(f"{cell},objective={cell[10:13]},done,{layer},0.5\n" for cell in cells for layer in range(3))
    (tmp_path / "results.csv").write_text("cell,condition,status,layer,metrics.eval_msve\n" + full[:-9])
    with pytest.raises(ValueError, match="results.csv: cut short"):  # cut inside its last row
        write_report(tmp_path)
    assert (tmp_path / "study.md").read_text() == "the saved report"
    (tmp_path / "spec.json").write_text('{"name": ')
    with pytest.raises(ValueError, match="spec.json: corrupt or truncated JSON"):
        write_report(tmp_path)


def test_the_cli_lists_every_built_in_study():
    from ictd_interp.analyses.studies.spec import builtin_studies
    from ictd_interp.cli import build_parser

    assert len(builtin_studies()) >= 7
    study = build_parser()._subparsers._group_actions[0].choices["study"]
    listed = [line.split(":")[0].strip() for line in study.epilog.splitlines()[1:]]
    assert listed == sorted(builtin_studies())  # each with its runs and measured time (``spec_size``)


def test_weight_probe_figures_show_only_the_cells_that_have_weights(tmp_path, monkeypatch):
    """A study mixing architectures: a standard cell has no cosines nor value-row signature, so those
    figures show the stylised condition alone (no empty panel, no legend entry without a line)."""
    import pandas as pd

    from ictd_interp.analyses.studies.report import write_report

    spec_dict = {"name": "mixed", "preset": "quick", "fixed": {}, "grid": {"objective": ["td", "neu"]}, "seeds": [0]}
    ids = list(zip(("stylised", "standard"), (cell.name for cell in load_spec(spec_dict).cells())))
    pd.DataFrame(
        [
            {
                "cell": c,
                "condition": cond,
                "seed": 0,
                "status": "done",
                "error": None,
                "layer": 0,
                "metrics.eval_msve": 0.5,
                "metrics.theta_star_msve": 2.6,
                "metrics.signature.reward": 1.0 if cond == "stylised" else None,
                "metrics.signature.next value": 0.9 if cond == "stylised" else None,
                "metrics.signature.current value": -0.8 if cond == "stylised" else None,
            }
            for cond, c in ids
        ]
    ).to_csv(tmp_path / "results.csv", index=False)
    pd.DataFrame(
        [
            {
                "cell": c,
                "condition": cond,
                "step": step,
                "layer": 0,
                "eval_msve": 1.0 / (step + 1),
                "theta_star_msve": 2.6,
                "kernel_diagonality_mean": 0.2,
                "cos_A": 0.5 + step / 10 if cond == "stylised" else None,
                "cos_V": 0.4 + step / 10 if cond == "stylised" else None,
            }
            for cond, c in ids
            for step in (0, 1)
        ]
    ).to_csv(tmp_path / "curves.csv", index=False)
    for name in ("depth", "extrapolation"):
        (tmp_path / f"{name}.csv").write_text("")
    (tmp_path / "spec.json").write_text(json.dumps(spec_dict))
    from ictd_interp.analyses.studies import report as study_report

    drawn = {}
    for name in ("signature", "cells_cosine_curves"):
        original = getattr(study_report, name)
        monkeypatch.setattr(
            study_report,
            name,
            lambda data, title, name=name, original=original: (
                drawn.setdefault(name, data) is not None and original(data, title)
            ),
        )
    write_report(tmp_path)
    assert set(drawn["signature"]["condition"]) == {"stylised"} == set(drawn["cells_cosine_curves"]["condition"])
    assert (tmp_path / "figures" / "signature.png").exists() and (
        tmp_path / "figures" / "msve_over_training.png"
    ).exists()
    text = (tmp_path / "study.md").read_text()
    assert "| standard |" in text and "figures/cosines_over_training.png" in text


def test_study_table_gives_t_intervals_and_names_a_diverged_seed():
    """Two seeds with MSVE 0.5 and 0.7: mean 0.6, t_{1,.975} = 12.706, s = 0.1414 -> half-width 1.271, cut at
    0 below (an MSVE is never negative). A third condition's seed with an infinite MSVE is named, never averaged
    away."""
    import math

    from ictd_interp.analyses.studies.report import _table_row

    def rows(condition, msves):
        return pd.DataFrame(
            [
                {
                    "condition": condition,
                    "cell": f"{condition}-s{i}",
                    "status": "done",
                    "layer": 0,
                    "metrics.eval_msve": m,
                }
                for i, m in enumerate(msves)
            ]
        )

    line, notes = _table_row("two", rows("two", [0.5, 0.7]))
    half = 12.706205 * math.sqrt(0.02) / math.sqrt(2)
    assert f"0.600 [0.000, {0.6 + half:.3f}]" in line and notes == []
    line, notes = _table_row("bad", rows("bad", [0.5, float("inf"), 0.6]))
    assert "not finite (1 of 3 diverged)" in line
    assert notes == ["metrics.eval_msve: 1 of 3 seeds diverged (bad-s1)"]


def test_a_cell_counts_as_running_only_while_its_process_lives(tmp_path):
    from ictd_interp.analyses.studies.cells import is_running as _is_running
    from ictd_interp.analyses.studies.cells import write_status as _write_status

    alive = _write_status(tmp_path / "a", "running")
    assert _is_running(alive)
    dead = {**alive, "pid": 2**22 + 12345}  # no such process
    assert not _is_running(dead) and not _is_running({**alive, "status": "done"})
    assert _is_running({**dead, "host": "another-node"})  # a remote node's pid is not ours to check


def test_the_phase_table_counts_seeds_that_learn_in_context_per_condition():
    import pandas as pd

    from ictd_interp.analyses.studies import phase

    spec_ = load_spec(spec(grid={"tied": [True, False]}, seeds=[0, 1]))
    learns = {
        "tied-True__seed-0": True,
        "tied-True__seed-1": True,
        "tied-False__seed-0": False,
        "tied-False__seed-1": True,
    }
    results = pd.DataFrame(
        [
            {
                "cell": c.name,
                "condition": c.condition,
                "status": "done",
                phase.LEARNS: learns[c.name],
                phase.DISCOUNT: 0.9,
                phase.MSVE: 0.4 + 0.1 * (not learns[c.name]),
                phase.CONSTANT: 0.6,
                phase.FIRST_VISIT: 0.5,
            }
            for c in spec_.cells()
        ]
    )
    rows = phase.fractions(phase.by_cell(results, spec_), spec_)
    assert [(r["label"], r["learned"], r["n"]) for r in rows] == [("tied=True", 2, 2), ("tied=False", 1, 2)]
    assert rows[1]["msve"].mean == pytest.approx(0.45) and rows[0]["share"].lo > 0.3  # Wilson of 2/2: [0.34, 1]
    assert "| tied=False | 1/2 | 0.50" in "\n".join(phase.markdown(rows))
    assert phase.phase_diagram(rows, spec_, "t") is not None
    assert rows[0]["runs_td"] is None and "| – |" in "\n".join(phase.markdown(rows))  # summaries before the ladder
    ladder = {
        phase.LEVEL: ["runs TD", "learns in context", "does not learn in context", "runs TD"],
        phase.EVERY_VISIT: [0.62] * 4,
        phase.CE: [0.33] * 4,
        phase.DEEP: [0.41, 1.9, 2.0, 0.40],
    }
    rows = phase.fractions(phase.by_cell(results.assign(**ladder), spec_), spec_)
    assert [r["runs_td"] for r in rows] == [1, 1] and rows[0]["deep"].mean == pytest.approx(1.155)
    assert "| tied=True | 2/2 | 1.00 [0.34, 1.00] | 1/2 |" in "\n".join(phase.markdown(rows))
    assert "| 0.620 | 0.330 |" in "\n".join(phase.markdown(rows))


def test_the_td_map_counts_seeds_that_run_td_and_sets_the_discount_beside_gamma():
    """Two discounts × two seeds, worked out by hand: 2/2 and 0/2 run TD (Wilson [0.34, 1] and [0, 0.66]); the
    learned discount minus γ, Bayes and the gap closed are means over seeds; the discount figure draws γ's line."""
    import pandas as pd

    from ictd_interp.analyses.studies import phase, td_map

    spec_ = load_spec(spec(grid={"gamma": [0.5, 0.9]}, seeds=[0, 1]))
    by_gamma = {0.5: ("learns in context", 0.44, 0.2), 0.9: ("runs TD", 0.905, 0.6)}
    results = pd.DataFrame(
        [
            {
                "cell": c.name,
                "condition": c.condition,
                "status": "done",
                phase.LEARNS: True,
                phase.DISCOUNT: by_gamma[c.config.tasks.gamma][1] + 0.002 * c.overrides["seed"],
                phase.MSVE: 0.3,
                phase.CONSTANT: 0.6,
                phase.FIRST_VISIT: 0.5,
                phase.LEVEL: by_gamma[c.config.tasks.gamma][0],
                phase.BAYES: 0.1,
                phase.GAP: by_gamma[c.config.tasks.gamma][2] + 0.1 * c.overrides["seed"],
                phase.GAP_DEEP: 0.5,
            }
            for c in spec_.cells()
        ]
    )
    rows = phase.fractions(phase.by_cell(results, spec_), spec_)
    assert [(r["gamma"], r["runs_td"]) for r in rows] == [(0.5, 0), (0.9, 2)]
    assert rows[0]["td_share"].hi == pytest.approx(0.658, abs=1e-3) and rows[1]["td_share"].lo == pytest.approx(
        0.342, abs=1e-3
    )
    table = "\n".join(td_map.markdown(rows))
    assert "| gamma=0.5 | 0.5 | 0/2 | 0.00 [0.00, 0.66] | -0.059 [" in table
    assert "| gamma=0.9 | 0.9 | 2/2 | 1.00 [0.34, 1.00] | +0.006 [" in table
    assert "| 0.1 | 0.65 [" in table  # gap closed: mean of 0.6 and 0.7
    assert td_map.td_diagram(rows, spec_, "t") is not None
    fig = td_map.discount_figure(rows, spec_, "t")
    line = fig.axes[0].lines[0]
    assert list(line.get_xdata()) == [0.5, 0.9] and list(line.get_ydata()) == [0.5, 0.9]  # discount = γ
    assert td_map.discount_figure(rows, load_spec(spec(grid={"tied": [True]}, seeds=[0])), "t") is None
    assert td_map.markdown(phase.fractions(phase.by_cell(results.drop(columns=[phase.LEVEL]), spec_), spec_)) == []


def test_the_atlas_draws_a_panel_per_context_with_depth_by_gamma_squares_and_its_discounts_in_one_colour_a_depth():
    """Over depth × γ × n (the atlas's shape, less its recipe) the map has a panel per n, a square per depth and γ whose
    colour is the share that runs TD (set by hand: the 4-layer cells at γ 0.9 run TD in both seeds, nothing else), a
    panel not yet run is blank; the discount figure draws each depth in one colour in every panel."""
    import pandas as pd

    from ictd_interp.analyses.studies import phase, td_map

    grid = {"context_len": [10, 20], "n_layers": [2, 4], "gamma": [0.5, 0.9]}
    spec_ = load_spec(spec(grid=grid, seeds=[0, 1]))
    assert td_map.facets(spec_) == ["context_len"]
    assert td_map.facets(load_spec(spec(grid={"n_layers": [2, 4], "gamma": [0.5, 0.9]}, seeds=[0]))) is None
    first = lambda c: c.config.tasks.context_len == 10 or (c.config.model.n_layers, c.config.tasks.gamma) == (4, 0.5)  # noqa: E731
    done = [c for c in spec_.cells() if first(c)]  # n = 20's panel has only 4 layers at γ 0.5 done
    runs_td = lambda c: c.config.model.n_layers == 4 and c.config.tasks.gamma == 0.9  # noqa: E731
    results = pd.DataFrame(
        [
            {
                "cell": c.name,
                "condition": c.condition,
                "status": "done",
                phase.LEARNS: True,
                phase.DISCOUNT: c.config.tasks.gamma + 0.01 * c.config.model.n_layers,
                phase.MSVE: 0.3,
                phase.CONSTANT: 0.6,
                phase.FIRST_VISIT: 0.5,
                phase.LEVEL: "runs TD" if runs_td(c) else "learns in context",
            }
            for c in done
        ]
    )
    rows = phase.fractions(phase.by_cell(results, spec_), spec_)
    fig = td_map.td_panels(rows, spec_, "t")
    short, long = fig.axes[:2]
    assert [a.get_title() for a in (short, long)] == ["context_len=10", "context_len=20"]
    assert short.images[0].get_array().tolist() == [[0.0, 0.0], [0.0, 1.0]]  # rows γ 0.5, 0.9; columns 2, 4 layers
    assert [t.get_text().split("\n")[0] for t in short.texts] == ["0/2", "0/2", "0/2", "2/2"]
    assert long.images[0].get_array().mask.tolist() == [[True, False], [True, True]]  # not run: blank
    assert [t.get_text() for t in long.texts] == ["0/2\n[0.00, 0.66]"]
    square = load_spec(spec(grid={"n_layers": [2, 4], "gamma": [0.5, 0.9]}, seeds=[0]))
    assert td_map.td_panels(rows, square, "t") is None
    fig = td_map.discount_figure(rows, spec_, "t")
    assert fig.axes[0].get_legend_handles_labels()[1] == ["discount = γ (TD)", "n_layers=2", "n_layers=4"]
    assert fig.axes[0].containers[0].lines[0].get_ydata().tolist() == pytest.approx([0.52, 0.92])  # γ + 0.01 × 2
    four = fig.axes[0].containers[1].lines[0].get_color()
    assert [c.lines[0].get_color() for c in fig.axes[1].containers] == [four]  # the long panel's one line: 4 layers
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["discount = γ (TD)", "n_layers=2", "n_layers=4"]


def test_recipes_are_named_sets_of_settings_crossed_with_the_grid():
    recipes = {"deeper": {"n_layers": 6}, "window": {"loss_depths": "2,3"}}
    built = load_spec({**spec(grid={"recipe": ["deeper", "window"], "lr": [0.01]}, seeds=[0]), "recipes": recipes})
    cells = {c.name: c.config for c in built.cells()}
    assert set(cells) == {"recipe-deeper__lr-0.01__seed-0", "recipe-window__lr-0.01__seed-0"}
    assert cells["recipe-deeper__lr-0.01__seed-0"].model.n_layers == 6
    assert cells["recipe-window__lr-0.01__seed-0"].loss_depths == "2,3"
    assert cells["recipe-window__lr-0.01__seed-0"].model.n_layers == 3  # the fixed setting where no recipe sets it
    assert built.differences(load_spec(spec(grid={"recipe": ["deeper"]}, seeds=[0]) | {"recipes": recipes}))
    bad = [
        ({"recipe": ["deeper", "nope"]}, recipes, "'nope'] not in \\[recipes\\]"),
        ({"tied": [True]}, recipes, "grid.recipe lists none"),
        ({"recipe": ["deeper"], "n_layers": [4]}, recipes, "set by both the recipe and the grid"),
        ({"recipe": ["deeper"]}, {"deeper": {"n_layer": 6}}, "recipes.deeper.n_layer: unknown TrainConfig setting"),
    ]
    for grid, rec, message in bad:
        with pytest.raises(StudySpecError, match=message):
            load_spec({**spec(grid=grid, seeds=[0]), "recipes": rec})


def test_the_study_ladder_draws_each_condition_over_seeds_beside_the_estimators_on_its_tasks():
    """Two conditions × two seeds: the panel's points are the seeds' mean MSVE at each depth multiple, the estimators'
    lines their mean over seeds; a study whose summaries predate the kept baselines draws CE from the top rung."""
    import pandas as pd

    from ictd_interp.analyses.figures.style import text_outside
    from ictd_interp.analyses.studies import phase, td_map

    spec_ = load_spec(spec(grid={"gamma": [0.5, 0.9]}, seeds=[0, 1]))
    deep = {m: phase.LADDER_DEPTHS[m] for m in (1, 2, 4, 16)}
    rows_in = []
    for c in spec_.cells():
        s = c.overrides["seed"]
        rows_in.append(
            {
                "cell": c.name,
                "condition": c.condition,
                "status": "done",
                phase.LEARNS: True,
                phase.DISCOUNT: 0.9,
                phase.MSVE: 0.3,
                phase.CONSTANT: 0.6,
                phase.FIRST_VISIT: 0.5,
                phase.LEVEL: "runs TD",
                **{column: 0.4 / m + 0.02 * s for m, column in deep.items()},
                **{phase.LADDER_LINES[name]: v + 0.01 * s for name, v in zip(phase.LADDER_LINES, (0.6, 0.5, 0.2, 0.1))},
            }
        )
    rows = phase.fractions(phase.by_cell(pd.DataFrame(rows_in), spec_), spec_)
    fig = td_map.ladder_panels(rows, "t")
    assert len(fig.axes) == 2 and text_outside(fig) == []
    ax = fig.axes[0]
    (model,) = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert list(model.get_xdata()) == [1, 2, 4, 16]
    assert model.get_ydata() == pytest.approx([0.41, 0.21, 0.11, 0.035])  # mean of the two seeds
    drawn = {line.get_label(): line.get_ydata()[0] for line in ax.get_lines()}
    assert drawn["every-visit MC"] == pytest.approx(0.505) and drawn["CE (tabular TD)"] == pytest.approx(0.205)
    assert "runs TD 2/2" in ax.get_title()
    older = (
        pd.DataFrame(rows_in)
        .drop(columns=list(phase.LADDER_LINES.values()))
        .assign(**{phase.LADDER_TOP["tabular_td"]: 0.33})
    )
    drawn = {
        line.get_label(): line.get_ydata()[0]
        for line in td_map.ladder_panels(phase.fractions(phase.by_cell(older, spec_), spec_), "t").axes[0].get_lines()
    }
    assert drawn["CE (tabular TD)"] == pytest.approx(0.33) and "every-visit MC" not in drawn
    no_ladder = pd.DataFrame(rows_in).drop(columns=list(deep.values()))
    assert td_map.ladder_panels(phase.fractions(phase.by_cell(no_ladder, spec_), spec_), "t") is None
    assert td_map.ladder_panels(rows * (td_map.LADDER_PANELS // 2), "t") is not None  # 24 panels: drawn
    assert td_map.ladder_panels(rows * (td_map.LADDER_PANELS // 2 + 1), "t") is None  # 26: the atlas's depth.csv


def test_a_redrawn_report_removes_its_own_figures_it_no_longer_draws(tmp_path):
    """A figure an earlier report drew and this one does not (the ladder, once a study has more conditions than it
    takes) is removed; the figures drawn stay, and files that are not the report's are left alone. Every figure the
    report can draw is one it knows to remove."""
    import inspect
    import re

    from ictd_interp.analyses.studies import report

    for name in ("ladder.png", "ladder.svg", "runs_td.png", "notes.png"):
        (tmp_path / name).write_text("x")
    report.drop_stale_figures(tmp_path, {"runs_td"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.png", "runs_td.png"]
    drawn = set(re.findall(r'figs\["([a-z_]+)"\]', inspect.getsource(report)))
    assert drawn and drawn <= set(report.FIGURES)
