"""A search's space and options (rlperf.sweep.space), its results kit
(rlperf.sweep.search_results) and the refusals before Ray starts (docs/search.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rlperf.config.search_path import preset_file_overrides
from rlperf.layout import METRICS_FILE, SEARCH_FILE, SUMMARY_FILE
from rlperf.sweep.search_results import best_trial, trial_score, write_search_file
from rlperf.sweep.space import (
    Axis,
    SearchSpaceError,
    check_search_options,
    parse_space,
    tune_space,
    with_params,
)
from tests.conftest import run_rlperf


def test_space_from_hydra_optuna_syntax() -> None:
    space = parse_space(
        [
            "env=cartpole",
            "algo.lr=tag(log, interval(1e-5, 1e-3))",
            "algo.gamma=interval(0.9, 0.999)",
            "algo.minibatch_size=choice(64, 128, 256)",
            "algo.num_epochs=range(4, 13, 4)",
            "seed=range(1, 10, 3)",
            "model=choice(mlp64, mlp256)",
        ],
        "optuna",
    )
    assert space.fixed == ["env=cartpole"]
    axes = {a.key: a for a in space.axes}
    assert axes["algo.lr"] == Axis("algo.lr", "float", low=1e-5, high=1e-3, log=True)
    assert axes["algo.gamma"] == Axis("algo.gamma", "float", low=0.9, high=0.999)
    assert axes["algo.minibatch_size"].values == (64, 128, 256)
    assert axes["algo.num_epochs"] == Axis("algo.num_epochs", "int", low=4, high=12, step=4)
    # A range whose start is off its step's multiples: a choice of its values.
    assert axes["seed"] == Axis("seed", "choice", values=(1, 4, 7))
    assert axes["model"].values == ("mlp64", "mlp256")
    assert space.overrides({"algo.lr": 1e-4, "model": "mlp64"}) == [
        "env=cartpole",
        "algo.lr=0.0001",
        "model=mlp64",
    ]


def test_tune_objects_sample_inside_the_space() -> None:
    from ray import tune

    space = parse_space(
        [
            "algo.lr=tag(log, interval(1e-5, 1e-3))",
            "algo.num_epochs=range(4, 13, 4)",
            "algo.minibatch_size=choice(64, 128)",
            "workers=0,1",
        ],
        "random",
    )
    objects = tune_space(space)
    assert objects["workers"] == tune.grid_search([0, 1])
    for key in ("algo.lr", "algo.num_epochs", "algo.minibatch_size"):
        samples = objects[key].sample(size=200)
        assert all(space.axis(key).contains(v) for v in samples), key
        assert len(set(samples)) > 1
    assert set(objects["algo.num_epochs"].sample(size=200)) == {4, 8, 12}
    assert not space.axis("algo.lr").contains(2e-3)
    assert not space.axis("algo.num_epochs").contains(6)


def test_grid_algorithm_expands_lists_and_ranges() -> None:
    space = parse_space(["algo.num_epochs=range(1,4)", "workers=0,1"], "grid")
    assert [(a.values, a.grid) for a in space.axes] == [((1, 2, 3), True), ((0, 1), True)]
    with pytest.raises(SearchSpaceError, match="interval"):
        parse_space(["algo.lr=interval(1e-4,1e-3)"], "grid")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("cpu_affinity=choice(pinned,unrestricted)", "cannot vary inside a search"),
        ("gpu_layout=choice(none,shared)", "cannot vary inside a search"),
        ("ray.num_cpus=choice(1,2)", "cannot vary inside a search"),
        ("workers=0,1", "Optuna cannot search"),
        ("algo.lr=tag(exp, interval(1e-4,1e-3))", "unknown tag"),
        ("algo.lr=tag(log, choice(1e-4,1e-3))", "interval"),
        ("algo.lr=tag(log, interval(0,1e-3))", "above 0"),
        ("algo.lr=interval(1e-3,1e-4)", "start below its end"),
    ],
)
def test_refused_axes(override: str, message: str) -> None:
    with pytest.raises(SearchSpaceError, match=message):
        parse_space([override], "optuna")


def test_params_of_a_preset_and_the_command_line() -> None:
    params = {"algo.lr": "interval(1e-4, 1e-3)", "algo.num_epochs": "choice(1, 2)"}
    args = with_params(params, ["algo.num_epochs=4"])
    space = parse_space(args, "optuna")
    assert space.fixed == ["algo.num_epochs=4"] and [a.key for a in space.axes] == ["algo.lr"]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("algorithm", "hyperopt", "algorithm=hyperopt"),
        ("mode", "best", "mode=best"),
        ("num_samples", 0, "num_samples=0"),
        ("scheduler.name", "pbt", "scheduler.name=pbt"),
        ("scheduler.metric", "time_to_target_s", "a metrics.csv column"),
        ("scheduler.metric", "iter_s", "max or min with scheduler.metric=iter_s"),
    ],
)
def test_search_options_checked(key: str, value: object, message: str) -> None:
    from hydra_plugins.rlperf_sweeper.config import SearchConf

    opts = OmegaConf.structured(SearchConf(algorithm="optuna"))
    OmegaConf.update(opts, key, value)
    with pytest.raises(SearchSpaceError, match=message):
        check_search_options(opts)


def test_scores_best_and_preset(tmp_path: Path) -> None:
    """Scores come from the cells' own files; the best is among completed trials only."""
    trials = []
    for name, status, returns, ttt in [
        ("a", "completed", [10.0, 30.0], 12.5),
        ("b", "completed", [20.0, 25.0], None),
        ("c", "stopped_early", [90.0], None),
    ]:
        cell = tmp_path / name
        (cell / ".hydra").mkdir(parents=True)
        rows = "\n".join(f"{i},{r}" for i, r in enumerate(returns, 1))
        (cell / METRICS_FILE).write_text(f"iteration,episode_return_mean\n{rows}\n")
        (cell / SUMMARY_FILE).write_text(json.dumps({"status": status, "time_to_target_s": ttt}))
        (cell / ".hydra" / "config.yaml").write_text("algo:\n  lr: 0.001\nseed: 0\n")
        (cell / ".hydra" / "hydra.yaml").write_text(
            "hydra:\n  runtime:\n    choices:\n      env: cartpole\n      experiment: quickstart\n"
            "      hydra/launcher: rlperf_tune\n      study_training_row: null\n"
        )
        trials.append(
            {
                "subdir": name,
                "status": status,
                "params": {"algo.lr": 1e-3},
                "score": trial_score(cell, "episode_return_mean"),
            }  # fmt: skip
        )
    assert [t["score"] for t in trials] == [30.0, 25.0, 90.0]
    assert trial_score(tmp_path / "a", "time_to_target_s") == 12.5
    assert trial_score(tmp_path / "b", "time_to_target_s") is None
    assert best_trial(trials, "max")["subdir"] == "a"  # c stopped early: not comparable
    assert best_trial(trials, "min")["subdir"] == "b"
    path = write_search_file(tmp_path, {"metric": "episode_return_mean", "mode": "max"}, trials)
    data = json.loads(path.read_text())
    preset = Path(data["best"]["preset"])
    assert preset == tmp_path / "experiment" / "search_best.yaml"
    text = preset.read_text()
    assert text.startswith("# @package _global_\n")
    body = OmegaConf.create(text)
    assert OmegaConf.to_container(body.defaults) == [{"override /env": "cartpole"}]
    assert body.algo.lr == 0.001


def test_preset_file_overrides(tmp_path: Path) -> None:
    preset = tmp_path / "experiment" / "best.yaml"
    preset.parent.mkdir()
    preset.write_text("# @package _global_\nseed: 3\n")
    assert preset_file_overrides(["-m", f"experiment={preset}", "seed=1"]) == [
        "-m",
        "experiment=best",
        f"hydra.searchpath=[file://{tmp_path}]",
        "seed=1",
    ]
    assert preset_file_overrides(["experiment=quickstart"]) == ["experiment=quickstart"]
    with pytest.raises(ValueError, match="no such preset file"):
        preset_file_overrides([f"experiment={tmp_path / 'nope.yaml'}"])
    other = tmp_path / "best.yaml"
    other.write_text("seed: 3\n")
    with pytest.raises(ValueError, match="folder named experiment/"):
        preset_file_overrides([f"experiment={other}"])


def test_process_level_axis_refused_before_ray(tmp_path: Path) -> None:
    """Exit 2 with one line, before Ray starts: nothing is written in the search folder."""
    folder = tmp_path / "search"
    proc = run_rlperf(
        [
            "-m",
            "hydra.sweeper.search.algorithm=optuna",
            "cpu_affinity=choice(pinned,unrestricted)",
            f"hydra.sweep.dir={folder}",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("rlperf:")]
    assert lines == [
        "rlperf: cpu_affinity cannot vary inside a search: it decides how Ray is started and "
        "a search is one Tune run in one Ray; run one search per value of cpu_affinity instead"
    ]
    assert "Traceback" not in proc.stderr and not folder.exists()


def test_report_search_section(tmp_path: Path) -> None:
    """search.json -> the Search section: best-so-far over completed trials, the table, a figure."""
    from rlperf.report.export import render
    from rlperf.report.figures.search import draw_search_figures
    from rlperf.report.read.searches import best_so_far, read_searches
    from rlperf.report.sections.search import search_section

    trials = [
        {"number": 0, "subdir": "trial_a", "status": "completed", "score": 20.0,
         "params": {"algo.lr": 1e-3, "model": "mlp64"}},
        {"number": 1, "subdir": "trial_b", "status": "stopped_early", "score": 90.0,
         "params": {"algo.lr": 2e-4, "model": "mlp256"}},
        {"number": 2, "subdir": "trial_c", "status": "completed", "score": 35.0,
         "params": {"algo.lr": 5e-4, "model": "mlp64"}},
        {"number": 3, "subdir": "trial_d", "status": "completed", "score": 30.0,
         "params": {"algo.lr": 3e-4, "model": "mlp256"}},
    ]  # fmt: skip
    data = {
        "algorithm": "optuna", "metric": "episode_return_mean", "mode": "max",
        "scheduler": {"name": "asha"}, "scheduler_metric": "episode_return_mean",
        "space": {"algo.lr": "log float [0.0001, 0.01]", "model": "choice mlp64, mlp256"},
        "trials": trials, "best": {**trials[2], "preset": "x/experiment/search_best.yaml"},
    }  # fmt: skip
    (tmp_path / SEARCH_FILE).write_text(json.dumps(data))
    [search] = read_searches([tmp_path, tmp_path / "not-a-search"])
    assert best_so_far(search.trials, "max").tolist() == [20.0, 20.0, 35.0, 35.0]
    assert best_so_far(search.trials, "min").tolist() == [20.0, 20.0, 20.0, 20.0]
    draw_search_figures([search], tmp_path / "figures")
    assert search.figure == tmp_path / "figures" / "search.png" and search.figure.stat().st_size
    blocks = search_section([search])
    text = " ".join(b.text for b in blocks if isinstance(b, render.Para))
    assert "4 trials (3 completed, 1 stopped_early)" in text
    assert "Best: `trial_c` with `episode_return_mean` = 35" in text
    [table] = [b for b in blocks if isinstance(b, render.Table)]
    assert table.df["status"].tolist() == ["completed", "stopped_early", "completed", "completed"]
    assert [b.path for b in blocks if isinstance(b, render.Image)] == [search.figure]


def test_optuna_takes_results_without_a_summary_objective() -> None:
    """time_to_target_s is in a trial's last result only; Optuna must take the others."""
    from ray import tune

    from hydra_plugins.rlperf_sweeper.config import SearchConf
    from rlperf.sweep.searchers import searcher as tune_searcher

    opts = OmegaConf.structured(SearchConf(algorithm="optuna", metric="time_to_target_s"))
    OmegaConf.update(opts, "mode", "min")
    searcher = tune_searcher(opts)
    assert searcher.set_search_properties(None, None, {"algo.lr": tune.uniform(1e-4, 1e-3)})
    params = searcher.suggest("t1")
    assert 1e-4 <= params["algo.lr"] <= 1e-3
    searcher.on_trial_result("t1", {"episode_return_mean": 20.0, "training_iteration": 1})
    searcher.on_trial_complete("t1", {"time_to_target_s": 12.0, "training_iteration": 2})
    [trial] = searcher._ot_study.trials
    assert trial.value == 12.0 and trial.state.name == "COMPLETE"
