"""Comparison sets and objectives that measure the same work (issue 25, points 1-3):
cells are ranked only within their workload, on a time per unit of work; across workloads
only on emulator frames per second; machines side by side; answers first."""

from __future__ import annotations

import itertools
import re
from typing import Any

import numpy as np
import pandas as pd
import pytest
from support import synthetic

from rlperf.errors import ObjectiveError
from rlperf.report.build import build_report
from rlperf.report.cli import main
from rlperf.report.stats.robust import iqm
from rlperf.results.columns import OTHER_S, PHASES
from tests.conftest import THESIS

STUDY = THESIS / "ray_results" / "volta1_def"
_STARTS = itertools.count()


def _metrics(iter_s: float, env_steps: float, n: int = 6, trained: float | None = None,
             seed: int = 0) -> pd.DataFrame:  # fmt: skip
    """``n`` iterations (the first one warm-up) of ``iter_s`` s (±2 %) and ``env_steps``."""
    rng = np.random.default_rng(seed)
    t = iter_s * (1 + 0.02 * rng.standard_normal(n))
    out = pd.DataFrame({"iteration": np.arange(1, n + 1), "excluded": ["warmup"] + [""] * (n - 1)})
    for col in (*PHASES, OTHER_S):
        out[col] = t / 5
    out["iter_s"], out["time_s"] = t, np.cumsum(t)
    out["train_time_s"] = out["time_s"]
    out["env_steps"] = env_steps
    out["trained_steps"] = env_steps if trained is None else trained
    out["env_steps_per_s"] = env_steps / t
    out["episode_return_mean"] = np.linspace(-21, -18, n)
    return out


def _cell(metrics: pd.DataFrame, fp: dict[str, Any] | None = None, summary: dict | None = None,
          **config: Any) -> synthetic.CellSpec:  # fmt: skip
    cfg = synthetic.resolved_config(iterations=len(metrics), **config)
    body = dict(fp or synthetic.fingerprint())
    body["config"] = cfg
    # Cells with one host and start time are copies of one run: each its own start.
    body["start_time"] = f"2026-12-01T10:{next(_STARTS):02d}:00+00:00"
    return synthetic.CellSpec(cfg, synthetic.overrides_for(cfg), body,
                              {**synthetic.train_summary(metrics, cfg["model"]["name"]),
                               **(summary or {})}, metrics)  # fmt: skip


@pytest.fixture(scope="module")
def quickstart_and_study(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A quickstart-like cell (Pong v5, fixed skip 4, 1 000-step batches, 121 env steps/s)
    next to the study's folder (Pong v0, skip 2-4, 4 000-step batches, 305-399 env
    steps/s on model1)."""
    root = tmp_path_factory.mktemp("qs")
    synthetic.write_sweep(root / "quick", [
        _cell(_metrics(1000 / 121, 1000.0), gpu_layout="none", workers=1,
              algo__train_batch_size=1000, fp=synthetic.fingerprint(host="laptop", gpus=())),
    ])  # fmt: skip
    return build_report([root / "quick", STUDY], tmp_path_factory.mktemp("out"), figures=False)


def test_nothing_is_ranked_across_workloads(quickstart_and_study) -> None:
    res = quickstart_and_study
    conf = res.configurations[res.configurations["family"] == "training"]
    quick = conf[conf["cells"].str.contains("quick")].iloc[0]
    study = conf[~conf["cells"].str.contains("quick") & (conf["model"] == "model1")]
    assert quick["workload"] != study["workload"].iloc[0]
    # The quickstart is alone in its comparison: rank 1 of 1, nothing beats it on iter_s.
    assert quick["rank_in_workload"] == 1
    assert (conf["objective"] == "time per 1 000 env steps").all()
    assert quick["throughput"] == pytest.approx(121, rel=0.05)
    # No finding compares the quickstart with a study cell.
    for f in res.findings:
        cells = " ".join(f.cells)
        assert not ("quick" in cells and "volta1_def" in cells), f.text
    # Every family table says what it holds constant.
    md = res.markdown.read_text()
    training = md[md.index("\n## Training\n") : md.index("## Methods")]
    assert training.count("*Holds constant its workload, ") == training.count("\n### ")
    assert "Ranked on time per 1 000 env steps (s, lower is better)" in training


def test_each_workload_is_named_once_by_what_differs(quickstart_and_study) -> None:
    """Short names (model and the protocol fields that differ) everywhere; the whole
    workload once, in the title's legend (issue 43, point 1)."""
    res = quickstart_and_study
    conf = res.configurations[res.configurations["family"] == "training"]
    assert set(conf["workload"]) == {
        "model1 · Pong v0",
        "model1 · Pong v5",
        "model3 · Pong v0 · 252px",
        "model4 · Pong v0 · 168px",
    }
    md = res.markdown.read_text()
    legend = md[md.index("<details><summary>Workloads: 4") : md.index("## Answers")]
    whole = (
        "model1 · ppo · Pong v0 · frameskip 2–4 · sticky 0.25 · episodic life · "
        "clipped rewards · ≤10,000 steps · 4,000 env steps per batch · no target"
    )
    assert f"| model1 · Pong v0 | training | {whole} |" in legend
    protocol = "frameskip 2–4 · sticky 0.25 · episodic life · clipped rewards · ≤10,000 steps"
    assert md.count(protocol) == legend.count(protocol) == 3  # model1, model3, model4
    # Within a comparison set a configuration shows what varies there: no "legacy".
    model1 = md[md.index("\n### model1 · Pong v0\n") :]
    model1 = model1[: model1.index("\n### ", 1)]
    assert "| both · 16 workers |" in model1 and "legacy ·" not in model1.split("<details>")[0]


def test_findings_lead_with_the_number_in_a_short_sentence(quickstart_and_study) -> None:
    """One sentence of at most about 25 words per finding, the number first; the whole text
    under it; the legacy note once for the three comparisons it applies to (point 2)."""
    res = quickstart_and_study
    md = res.markdown.read_text()
    section = md[md.index("## Findings") : md.index("## Across workloads")]
    heads = [line[2:] for line in section.splitlines() if line.startswith("- ")]
    words = [len([w for w in h.split() if w not in ("·", "†")]) for h in heads]
    assert len(heads) == 4 and max(words) <= 27, (words, heads)
    assert all(re.match(r"[-+]?\d", h) for h in heads[:3]), heads
    assert sum("legacy RLlib 1.x" in h or "study's way" in h for h in heads) == 1
    assert "in 3 comparisons: model1 · Pong v0, model3 · Pong v0 · 252px, model4" in section
    assert section.count("The study's way averages RLlib's 10-iteration window") == 1
    # The whole text (cells, method) stays in report.md, under each headline.
    assert "(cell `" in section and section.count("\n  - ") == len(heads)


def test_each_answers_figure_plots_only_its_comparison_set(quickstart_and_study, tmp_path):
    """Every answer's figure holds the configurations of its own comparison set and no
    other: the quickstart (Pong v5) never appears in a Pong v0 answer (point 4)."""
    from rlperf.report.sections.answers import draw

    res = quickstart_and_study
    found = res.sections["answers"]
    workload_of = dict(zip(res.configurations["configuration"], res.configurations["workload"],
                           strict=True))  # fmt: skip
    figured = [x for x in found if len(x.points) >= 2]
    assert {x.question for x in figured} == {"How many env runners pay off?",
                                             "Where should the GPU(s) go?"}  # fmt: skip
    for x in figured:
        assert {workload_of[c] for c in x.points["configuration"]} == {x.workload}
        assert not any("quick" in c for c in x.points["configuration"])
    drawn = draw(found, tmp_path)
    assert sorted(drawn) == [f"answer_{n}" for n in range(1, len(figured) + 1)]
    assert all(x.figure is not None and x.figure.is_file() for x in figured)


def test_across_workloads_on_emulator_frames(quickstart_and_study) -> None:
    res = quickstart_and_study
    (table,) = [t for t in res.sections["across"] if t.kind == "workloads"]
    assert table.ranked and "emulator frames per second" in table.heading
    rows = table.rows.set_index("configuration")
    quick = rows.loc[[i for i in rows.index if "quick" in i][0]]
    assert quick["frames_per_step"] == 4.0  # v5 with rlperf's skip of 4
    assert quick["frames_per_s"] == pytest.approx(4 * 121, rel=0.05)
    study = rows.loc[[i for i in rows.index if "model1_both_gpus_16" in i][0]]
    assert study["frames_per_step"] == 3.0  # Pong-v0: a random skip of 2, 3 or 4
    # Faster study cells rank above the quickstart on frames/s.
    faster = rows[rows["frames_per_s_low"] > quick["frames_per_s_high"]]
    assert len(faster) >= 5 and (faster["rank"] < quick["rank"]).all()
    md = res.markdown.read_text()
    assert "## Across workloads: emulator frames per second" in md


def test_the_study_worker_sweep_ranks_on_work_not_iterations(tmp_path) -> None:
    """16 workers sampled 6 400 env steps per iteration and 4 workers 4 000: on iter_s 16
    ranks behind 4; per 1 000 env steps it is faster (SPEC §5)."""
    res = build_report([STUDY], tmp_path, figures=False)
    runs = res.configurations.set_index("config")
    four, sixteen = runs.loc["both · 4 workers"], runs.loc["both · 16 workers"]
    assert sixteen["iter_s_mean"] > four["iter_s_mean"]
    assert sixteen["objective_value"] < four["objective_value"]
    assert sixteen["rank_in_workload"] < four["rank_in_workload"]
    assert sixteen["throughput"] == pytest.approx(375, abs=1)
    assert four["throughput"] == pytest.approx(305, abs=1)


def test_iter_s_is_refused_where_iterations_hold_different_work(tmp_path, capsys) -> None:
    with pytest.raises(ObjectiveError, match="4,000, 4,800, 6,400"):
        build_report([STUDY], tmp_path / "a", figures=False, objective="iter_s")
    assert main([str(STUDY), "--objective", "iter_s", "--no-figures", "-q",
                 "--out", str(tmp_path / "b")]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rlperf-report: error: --objective iter_s")
    assert not (tmp_path / "b" / "report.md").exists()


def test_iter_s_where_every_iteration_holds_the_same_work(tmp_path) -> None:
    synthetic.write_sweep(tmp_path / "sweep", [
        _cell(_metrics(10.0, 4000.0, seed=1), workers=8),
        _cell(_metrics(12.0, 4000.0, seed=2), workers=4),
    ])  # fmt: skip
    res = build_report([tmp_path / "sweep"], tmp_path / "out", figures=False, objective="iter_s")
    conf = res.configurations.set_index("config")
    assert (conf["objective_key"] == "iter_s").all()
    assert conf.loc["8 workers", "objective_value"] == pytest.approx(10.0, rel=0.03)
    assert conf.loc["8 workers", "speedup"] == pytest.approx(1.2, rel=0.05)  # lower is better
    md = res.markdown.read_text()
    assert "every iteration sampled 4,000 env steps" in md
    default = build_report([tmp_path / "sweep"], tmp_path / "out2", figures=False)
    assert default.configurations.set_index("config").loc["8 workers", "objective_value"] == (
        pytest.approx(2.5, rel=0.03)
    )  # 10 s per 4 000 env steps


def test_time_to_target_needs_a_target(tmp_path) -> None:
    synthetic.write_sweep(tmp_path / "s", [_cell(_metrics(10.0, 4000.0))])
    with pytest.raises(ObjectiveError, match="no run of training"):
        build_report([tmp_path / "s"], tmp_path / "o", figures=False, objective="time_to_target")


def test_algorithms_side_by_side_without_a_fastest_algorithm(tmp_path) -> None:
    """PPO and DQN (8 replay updates per env step) on one env: separate comparisons, shown
    side by side on throughput, never ranked against each other."""
    dqn = synthetic.shipped_option("algo", "dqn")
    synthetic.write_sweep(tmp_path / "s", [
        _cell(_metrics(2.0, 1000.0, seed=1), workers=2),
        _cell(_metrics(4.0, 1000.0, trained=8000.0, seed=2), workers=2, algo=dqn),
    ])  # fmt: skip
    res = build_report([tmp_path / "s"], tmp_path / "o", figures=False)
    conf = res.configurations
    assert conf["workload"].nunique() == 2 and (conf["rank_in_workload"] == 1).all()
    (table,) = [t for t in res.sections["across"] if t.kind == "workloads"]
    assert not table.ranked and "rank" not in table.rows
    assert any("different algorithms (dqn, ppo)" in n for n in table.notes)
    for f in res.findings:
        assert "ppo" not in f.text or "dqn" not in f.text, f.text
    # DQN's learner trains on 8 steps per env step: its time per 1 000 trained steps too.
    dqn_row = conf.set_index("config").loc["dqn"]
    assert dqn_row["trained_per_env_step"] == pytest.approx(8.0)
    assert dqn_row["s_per_1k_trained_steps"] == pytest.approx(4.0 / 8, rel=0.05)
    assert "| s per 1 000 trained steps |" in res.markdown.read_text()


def test_machines_are_an_axis(tmp_path) -> None:
    """The same two configurations on two machines: one table with each machine's value,
    the speedup of one over the other and the fingerprint fields that differ."""
    slow = synthetic.fingerprint(host="a", cpu_model="Intel Xeon Gold 6138")
    fast = synthetic.fingerprint(host="b", cpu_model="AMD EPYC 9654")
    cells = []
    for fp, scale in ((slow, 1.0), (fast, 0.5)):
        for workers, t in ((4, 12.0), (8, 10.0)):
            cells.append(_cell(_metrics(t * scale, 4000.0, seed=workers), fp=fp, workers=workers))
    synthetic.write_sweep(tmp_path / "s", cells)
    res = build_report([tmp_path / "s"], tmp_path / "o", figures=False)
    (table,) = [t for t in res.sections["across"] if t.kind == "machines"]
    assert len(table.rows) == 2 and "cpu_model" in table.notes
    (col,) = [c for c in table.rows.columns if " over " in c]
    for sp in table.rows[col]:
        assert sp.value == pytest.approx(2.0, rel=0.05) and sp.low > 1.5
    md = res.markdown.read_text()
    answers = md[md.index("## Answers") : md.index("## Findings")]
    assert "### Which machine is faster?" in answers and "2.00× as fast" in answers


def test_answers_first_and_only_what_the_data_answers(tmp_path) -> None:
    synthetic.write_sweep(tmp_path / "s", [
        _cell(_metrics(10.0, 4000.0, seed=1), cpu_affinity="unrestricted"),
        _cell(_metrics(11.0, 4000.0, seed=2), cpu_affinity="pinned"),
    ])  # fmt: skip
    res = build_report([tmp_path / "s"], tmp_path / "o", figures=False)
    md = res.markdown.read_text()
    assert md.index("## Answers") < md.index("## Findings") < md.index("## Methods")
    answers = md[md.index("## Answers") : md.index("## Findings")]
    assert "### What does CPU pinning cost?" in answers
    assert "all CPUs is fastest" in answers
    ratio = float(re.search(r"pinned is (\d\.\d+)× \[", answers).group(1))  # type: ignore[union-attr]
    assert 1.04 < ratio < 1.16  # 11 s against 10 s per iteration, ±2 % noise
    for question in ("pay off?", "GPU(s) go?", "backend", "target first", "machine"):
        assert question not in answers


def test_the_same_warning_or_finding_of_several_cells_is_one_line(tmp_path) -> None:
    one_iteration = [_metrics(5.0, 1000.0, n=1, seed=k) for k in range(4)]
    synthetic.write_sweep(tmp_path / "s", [_cell(m, workers=k + 1)
                                           for k, m in enumerate(one_iteration)])  # fmt: skip
    res = build_report([tmp_path / "s"], tmp_path / "o", figures=False)
    folded = [w for w in res.warnings if "iterations excluded" in w]
    assert len(folded) == 1 and folded[0].startswith("4 cells: all 1 iterations excluded")
    assert res.markdown.read_text().count("iterations excluded (warmup 1") == 1 + 4  # + notes


def test_returns_compared_with_iqm_over_seeds(tmp_path) -> None:
    """Two configurations with 3 seeds each on one env: the unit is the seed, each run's
    last return; IQM and P(improvement) as rliable computes them (robust.py)."""
    cells, finals = [], {4: [], 8: []}
    for workers, base in ((4, -20.0), (8, -10.0)):
        for seed in range(3):
            m = _metrics(10.0, 4000.0, seed=seed)
            m["episode_return_mean"] = np.linspace(-21, base + seed, len(m))
            finals[workers].append(base + seed)
            cells.append(_cell(m, workers=workers, seed=seed))
    synthetic.write_sweep(tmp_path / "s", cells)
    res = build_report([tmp_path / "s"], tmp_path / "o", figures=True)
    (rc,) = res.sections["returns"]
    assert rc.unit == "seed" and rc.reference == "model1 · 8 workers"
    table = rc.table.set_index("label")
    assert table.loc["model1 · 8 workers", "iqm"] == pytest.approx(iqm(np.array(finals[8])))
    assert table.loc["model1 · 4 workers", "p_improvement"] == 0.0  # every run lower
    assert rc.figure is not None and rc.figure.is_file()
    md = res.markdown.read_text()
    assert "### Training returns on Pong v5" in md and "Unit: seed" in md
