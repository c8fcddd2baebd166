"""Repeats that stop when sure against a fixed design (prints figures; not a test).

Runs ``rlperf -m experiment=scaling_small`` twice, one after the other, each in its own
``rlperf`` process and sweep folder:

(a) adaptive: ``hydra.sweeper.repeats.min=2 max=5 precision=0.05 race=true``;
(b) the reference: a fixed design of 5 runs of every cell (``repeats.min=5``).

Then reads both with the report (``rlperf.report.build_report``) and prints, per
comparison set: each configuration's objective with its run-to-run interval and runs in
both, the best of each, every pair the reference separates (intervals apart) and whether
the adaptive sweep ranks it the same way, and the compute of each: cell-seconds (the
launcher's wall time of every trial, ``sweep.json``) and env steps. Beside them: an oracle
that knew the reference's answer (:func:`oracle`), and the adaptive rule replayed on the
reference's own runs (:func:`replay`), which compares the two designs on the same runs.

    python benchmarks/bench_repeats.py [--out DIR] [--only adaptive|fixed]
        [--matrix scaling_small|wide] [--prior SWEEP ...] [overrides ...]

``--prior SWEEP ...`` gives the adaptive design a history prior
(``hydra.sweeper.repeats.prior``): earlier sweeps of this machine whose repeated
configurations fit the run-to-run variance (docs/sweeps.md). ``--matrix wide`` measures
instead a matrix whose configurations differ widely (:data:`MATRICES`).

The sweeps run with ``--out`` as their working directory (a checkout's own ``conf/`` there
would be taken for a user's config folder).

Extra arguments are passed to both sweeps (e.g. ``train.iterations=4``). Takes about
35 minutes for ``scaling_small`` and 30 for ``wide`` on the 2-core development machine
(docs/benchmarks.md#repeats-and-racing).

``--downstream`` measures instead what repeats of a downstream sweep add where its
upstream already repeats (docs/sweeps.md#downstream-sweeps): a training sweep of
``model=model1,model4 workers=0 train.iterations=1`` with 2 runs of each, then the study's
edge matrix over it (``backend=rllib,tflite_fp32,tflite_int8``, small edge settings) with
2 runs of each cell; the report is read twice, on every run (2 upstream x 2 downstream
runs per configuration) and on run 0 of each cell only (the upstream's runs alone), and
the figures printed: each configuration's latency interval, how the run-to-run spread
splits between the training runs and the downstream repeats, and the verdicts. About 15
minutes on the 2-core development machine.

``--fresh-ray N`` measures instead what a fresh Ray per run would change: N runs of one
tiny configuration as a sweep's repeats (one Ray for all) and N single runs (each starts
and stops its own Ray), alternating, with each run's time per 1 000 env steps, its mean
and run-to-run spread, and each side's wall time per run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

from rlperf.layout import INDEX_FILE
from rlperf.report import build_report
from rlperf.stats import intervals
from rlperf.sweep.design import Design
from rlperf.vocabulary import EARLY_CLOSINGS

PRESET = "experiment=scaling_small"
#: The matrices measured: the preset's (8 configurations within 30 % of each other), and
#: one whose configurations differ widely: 1 or 8 envs per runner by 1, 2, 4 or 8 SGD epochs
#: over each batch (the learner's share of an iteration; the env steps measured stay).
MATRICES = {
    "scaling_small": [PRESET],
    "wide": [PRESET, "workers=0", "env.engine=python", "env_runner.num_envs=1,8",
             "algo.num_epochs=1,2,4,8"],
}  # fmt: skip
#: The adaptive design measured (and replayed, :func:`replay`).
ADAPTIVE = Design(min=2, max=5, precision=0.05, race=True)
DESIGNS = {
    "adaptive": [f"hydra.sweeper.repeats.min={ADAPTIVE.min}",
                 f"hydra.sweeper.repeats.max={ADAPTIVE.max}",
                 f"hydra.sweeper.repeats.precision={ADAPTIVE.precision}",
                 f"hydra.sweeper.race={str(ADAPTIVE.race).lower()}"],
    "fixed": [f"hydra.sweeper.repeats.min={ADAPTIVE.max}"],
}  # fmt: skip


def run_sweep(name: str, folder: Path, matrix: list[str], extra: list[str]) -> float:
    """``rlperf -m <matrix> <design> <extra>`` into ``folder``; its wall s."""
    cmd = [sys.executable, "-m", "rlperf", "-m", *matrix, *DESIGNS[name], *extra,
           f"hydra.sweep.dir={folder}"]  # fmt: skip
    print(f"[{name}] {' '.join(cmd[2:])}", flush=True)
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=folder.parent)
    wall = time.monotonic() - t0
    (folder / "terminal.txt").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        print(proc.stderr[-3000:])
        raise SystemExit(f"[{name}] rlperf exited {proc.returncode}")
    return wall


def compute(folder: Path) -> dict[str, float]:
    """Cell-seconds (every trial's wall time), runs and Ray starts of a sweep folder."""
    index = json.loads((folder / INDEX_FILE).read_text())
    cells = [c for c in index["cells"].values() if c["status"] == "completed"]
    return {
        "runs": len(cells),
        "cell_s": sum(float(c["wall_s"] or 0) for c in cells),
        "ray_starts": len(index["groups"]),
        "ray_start_s": sum(float(g.get("ray_start_s") or 0) for g in index["groups"]),
    }


def table(folder: Path, family: str = "training") -> pd.DataFrame:
    """The report's configurations: label, objective with its interval, runs, workload; and
    in ``attrs["estimates"]`` each label's estimate (the report's, for its speedups)."""
    report = build_report([folder], folder / "report", figures=False)
    df = report.configurations
    df = df[df["family"] == family]
    cols = ["workload", "label", "objective_value", "objective_ci_low", "objective_ci_high",
            "repeats", "interval", "rank_in_workload"]  # fmt: skip
    out = df[cols].set_index("label")
    estimates = report.analyses[family].estimates
    out.attrs["configuration"] = dict(zip(df["label"], df["configuration"], strict=True))
    out.attrs["estimates"] = {
        label: estimates[c] for label, c in zip(df["label"], df["configuration"], strict=True)
    }
    return out


def separated(t: pd.DataFrame) -> list[tuple[str, str]]:
    """Pairs (faster, slower) that the report tells apart, per workload: the speedup it
    prints (Welch on the runs' logs, 95 %) excludes 1 (``rlperf.stats.intervals.separated``)."""
    est = t.attrs["estimates"]
    out = []
    for _, g in t.groupby("workload"):
        for a, b in itertools.permutations(g.index, 2):
            if est[a].value < est[b].value and intervals.separated(est[a], est[b]):
                out.append((a, b))
    return out


def _ran(folder: Path) -> dict[str, tuple[str, float]]:
    """Each completed cell's folder name: when it started and its wall time (``sweep.json``)."""
    index = json.loads((folder / INDEX_FILE).read_text())
    return {c["subdir"]: (str(c["started_at"]), float(c["wall_s"] or 0))
            for c in index["cells"].values() if c["status"] == "completed"}  # fmt: skip


def oracle(folder: Path, t: pd.DataFrame, first: int = 2) -> tuple[float, float]:
    """What a race that knew the reference's answer would spend, from the reference sweep
    ``folder`` and its table ``t``: every configuration the reference separates from its
    set's best closed after its ``first`` runs, the others run to the end; its cell-seconds
    and the reference's (each run's own wall time, in the order the rounds ran them)."""
    ran = _ran(folder)
    runs = build_report([folder], folder / "report", figures=False).runs
    label_of = {c: label for label, c in t.attrs["configuration"].items()}
    est = t.attrs["estimates"]
    spent = total = 0.0
    for conf, rows in runs[runs["family"] == "training"].groupby("configuration"):
        label = label_of[str(conf)]
        g = t[t["workload"] == t.loc[label, "workload"]]
        best = min(g.index, key=lambda n: est[n].value)
        closes = label != best and intervals.separated(est[best], est[label])
        times = [w for _, w in sorted(ran[Path(str(c)).name] for c in rows["cell"]
                                      if Path(str(c)).name in ran)]  # fmt: skip
        spent += sum(times[:first] if closes else times)
        total += sum(times)
    return spent, total


def replay(folder: Path, prior: list[Path]) -> tuple[float, float, list[str]]:
    """The adaptive design's rounds (``rlperf.sweep.rounds.decide``, the sweep's own rule
    and history prior) replayed on the reference sweep ``folder``'s runs, each
    configuration's in the order its rounds ran them: the cell-seconds it would have spent,
    the reference's, and each early closing's sentence. Both designs on the same runs: the
    rule's saving without the noise of a second sweep."""
    from rlperf.report.judge import judge_runs
    from rlperf.stats.race import History
    from rlperf.sweep import rounds

    ran = _ran(folder)
    runs: dict[str, list] = {}
    for v in judge_runs([folder]):
        runs.setdefault(v.configuration, []).append(v)
    for values in runs.values():
        values.sort(key=lambda v: ran[v.path.name][0])
    history = History.of(judge_runs(prior)) if prior else None
    labels = {c: values[0].label for c, values in runs.items()}
    design = replace(ADAPTIVE, prior=tuple(str(p) for p in prior))
    open_, seen, rules, spent, said = set(runs), [], {}, 0.0, []
    for r in range(design.max):
        for conf in sorted(open_):
            if r < len(runs[conf]):
                seen.append(runs[conf][r])
                spent += ran[runs[conf][r].path.name][1]
        decision = rounds.decide(design, r, seen, {c: c for c in runs}, open_, labels,
                                 history, rules)  # fmt: skip
        rules.update(decision.rules)
        for conf, closed in decision.closing.items():
            open_.discard(conf)
            if closed.why in EARLY_CLOSINGS:
                said.append(f"{labels.get(conf, conf)}: {closed.text}")
        if not open_:
            break
    return spent, sum(w for _, w in ran.values()), said


TINY = ["model=mlp64", "env=cartpole", "workers=0", "algo.train_batch_size=1000",
        "algo.minibatch_size=250", "algo.num_epochs=1", "train.iterations=6",
        "train.warmup_iterations=1", "train.env_ceiling.enabled=false"]  # fmt: skip


def _s_per_1k(run: Path) -> float:
    m = pd.read_csv(run / "metrics.csv")
    kept = m[m["excluded"].fillna("").eq("")]
    return 1000 * float(kept["iter_s"].sum()) / float(kept["env_steps"].sum())


def fresh_ray(out: Path, n: int) -> None:
    """N repeats in one Ray (a sweep) against N single runs with a Ray each."""
    sweep = out / "shared"
    t0 = time.monotonic()
    cmd = [sys.executable, "-m", "rlperf", "-m", *TINY, f"hydra.sweeper.repeats.min={n}",
           f"hydra.sweep.dir={sweep}"]  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=out)
    shared_wall = time.monotonic() - t0
    index = json.loads((sweep / INDEX_FILE).read_text())
    shared = [_s_per_1k(sweep / c["subdir"]) for c in index["cells"].values()]
    single, walls = [], []
    for k in range(n):
        run = out / "single" / str(k)
        t0 = time.monotonic()
        cmd = [sys.executable, "-m", "rlperf", *TINY, f"seed={k}", f"hydra.run.dir={run}"]
        subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=out)
        walls.append(time.monotonic() - t0)
        single.append(_s_per_1k(run))
    for name, values, wall in (("one Ray, repeats", shared, shared_wall / n),
                               ("a Ray per run", single, sum(walls) / n)):  # fmt: skip
        v = pd.Series(values)
        runs = ", ".join(f"{x:.3f}" for x in v)
        spread = v.std(ddof=1) / v.mean()
        print(f"{name}: s per 1 000 env steps {v.mean():.3f} (runs {runs}), "
              f"run-to-run spread {spread:.1%}, wall {wall:.1f} s per run")  # fmt: skip


EDGE = ["stage=edge", "backend=rllib,tflite_fp32,tflite_int8", "edge.episodes=1",
        "edge.steps=300", "edge.warmup_steps=20", "edge.fidelity_observations=50",
        "edge.calibration_size=50"]  # fmt: skip


def _rlperf(args: list[str], cwd: Path) -> None:
    print(f"rlperf {' '.join(args)}", flush=True)
    proc = subprocess.run([sys.executable, "-m", "rlperf", *args], capture_output=True,
                          text=True, check=False, cwd=cwd)  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"rlperf exited {proc.returncode}: {proc.stderr[-3000:]}")


def _first_runs(folder: Path, to: Path) -> Path:
    """A copy of sweep ``folder`` holding run 0 of each cell only (its repeats left out)."""
    index = json.loads((folder / INDEX_FILE).read_text())
    keep = {h: c for h, c in index["cells"].items() if not c.get("repeat")}
    shutil.rmtree(to, ignore_errors=True)
    shutil.copytree(folder, to, ignore=lambda d, names: [
        n for n in names if Path(d) == folder and "-r" in n or n == "report"])  # fmt: skip
    (to / INDEX_FILE).write_text(json.dumps({**index, "cells": keep}))
    return to


def downstream(out: Path) -> None:
    """Repeats of an edge sweep over a repeated training sweep: what they change."""
    out.mkdir(parents=True, exist_ok=True)
    upstream, edge = out / "upstream", out / "edge"
    if not (upstream / INDEX_FILE).is_file():
        _rlperf(["-m", "model=model1,model4", "workers=0", "train.iterations=1",
                 "hydra.sweeper.repeats.min=2", f"hydra.sweep.dir={upstream}"], out)  # fmt: skip
    if not (edge / INDEX_FILE).is_file():
        _rlperf(["-m", *EDGE, f"run={upstream}", "hydra.sweeper.repeats.min=2",
                 f"edge.cache_dir={out / 'cache'}", f"hydra.sweep.dir={edge}"], out)  # fmt: skip
    both = table(edge, "inference")
    once = table(_first_runs(edge, out / "edge-run0"), "inference")
    pd.set_option("display.width", 160)
    for name, t in (("2 upstream x 2 downstream runs", both), ("upstream runs only", once)):
        t = t.assign(half_width=(t["objective_ci_high"] - t["objective_ci_low"]) / 2
                     / t["objective_value"])  # fmt: skip
        print(f"\n== {name}")
        print(t.sort_values(["workload", "objective_value"]).to_string(float_format="%.4f"))
    # How the run-to-run spread splits: between the downstream repeats of one training job,
    # and between the training jobs (their repeats' mean log values); each run's value is
    # the report's (runs.csv objective_value).
    index = json.loads((edge / INDEX_FILE).read_text())
    by_subdir = {c["subdir"]: c for c in index["cells"].values()}
    runs = build_report([edge], edge / "report", figures=False).runs
    rows = []
    for _, r in runs[runs["family"] == "inference"].iterrows():
        c = by_subdir[Path(str(r["cell"])).name]
        if c["status"] == "completed" and r["objective_value"] > 0:
            overrides = [o for o in c["overrides"] if not o.startswith(("seed=", "run="))]
            rows.append({"config": " ".join([str(r["model"]), *sorted(overrides)]),
                         "job": c["upstream"],
                         "log": math.log(float(r["objective_value"]))})  # fmt: skip
    df = pd.DataFrame(rows)
    within = df.groupby(["config", "job"])["log"].var(ddof=1).mean()
    between = df.groupby(["config", "job"])["log"].mean().groupby("config").var(ddof=1).mean()
    print(f"\n== log-variance of the latency: between downstream repeats of one training job "
          f"{within:.5f}, between the training jobs' means {between:.5f}")  # fmt: skip
    for name, folder in (("both", edge), ("upstream only", out / "edge-run0")):
        md = (folder / "report" / "report.md").read_text()
        answers = md[md.index("## Answers") :].split("\n## ", 2)[0]
        print(f"\n== answers, {name}:\n{answers}")
    print(f"compute: {compute(edge)} (the upstream runs alone: {compute(out / 'edge-run0')})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench-repeats").resolve())
    parser.add_argument("--only", choices=sorted(DESIGNS))
    parser.add_argument("--fresh-ray", type=int, metavar="N")
    parser.add_argument("--downstream", action="store_true")
    parser.add_argument("--matrix", choices=sorted(MATRICES), default="scaling_small")
    parser.add_argument("--prior", nargs="+", type=Path, default=[], metavar="SWEEP",
                        help="earlier sweeps of this machine: the adaptive design's "
                             "hydra.sweeper.repeats.prior")  # fmt: skip
    args, extra = parser.parse_known_args()
    args.out = args.out.resolve()
    if args.downstream:
        downstream(args.out)
        return
    if args.fresh_ray:
        fresh_ray(args.out, args.fresh_ray)
        return
    walls = {}
    prior = ",".join(str(p.resolve()) for p in args.prior)
    for name in DESIGNS:
        folder = args.out / name
        given = [f"hydra.sweeper.repeats.prior=[{prior}]"] if prior and name == "adaptive" else []
        if args.only in (None, name) and not (folder / INDEX_FILE).is_file():
            walls[name] = run_sweep(name, folder, MATRICES[args.matrix], [*given, *extra])
    tables = {name: table(args.out / name) for name in DESIGNS}
    costs = {name: compute(args.out / name) for name in DESIGNS}
    pd.set_option("display.width", 160)
    for name, t in tables.items():
        wall = f", wall {walls[name]:.0f} s" if name in walls else ""
        print(f"\n== {name}: {costs[name]}{wall}")
        print(t.sort_values(["workload", "objective_value"]).to_string(float_format="%.4f"))
    ref, ada = tables["fixed"], tables["adaptive"]
    print("\n== best per comparison set")
    for workload, g in ref.groupby("workload"):
        best_ref = g["objective_value"].idxmin()
        a = ada[ada["workload"] == workload]
        best_ada = a["objective_value"].idxmin()
        print(f"{workload}: fixed {best_ref}, adaptive {best_ada}: "
              f"{'same' if best_ref == best_ada else 'DIFFERENT'}")  # fmt: skip
    pairs = separated(ref)
    value = ada["objective_value"]
    kept = [(f, s) for f, s in pairs if value[f] < value[s]]
    print(f"\n== pairs the reference separates: {len(pairs)}; ranked the same by the adaptive "
          f"sweep: {len(kept)}")  # fmt: skip
    for f, s in pairs:
        mark = "ok" if (f, s) in kept else "SWAPPED"
        print(f"  {f} < {s}: {mark}")
    spent, total = oracle(args.out / "fixed", ref)
    print(f"\n== oracle (closes every configuration the reference separates from the best "
          f"after 2 runs): {spent:.0f} of {total:.0f} cell-s = {spent / total:.0%}")  # fmt: skip
    spent, total, said = replay(args.out / "fixed", [p.resolve() for p in args.prior])
    print(f"\n== the adaptive rule replayed on the reference's runs: {spent:.0f} of {total:.0f} "
          f"cell-s = {spent / total:.0%}")  # fmt: skip
    for line in said:
        print(f"  {line}")
    share = costs["adaptive"]["cell_s"] / costs["fixed"]["cell_s"]
    print(f"\n== compute: adaptive {costs['adaptive']['cell_s']:.0f} cell-s in "
          f"{costs['adaptive']['runs']} runs; fixed {costs['fixed']['cell_s']:.0f} cell-s in "
          f"{costs['fixed']['runs']} runs; adaptive / fixed = {share:.0%}")  # fmt: skip


if __name__ == "__main__":
    main()
