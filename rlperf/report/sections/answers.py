"""The report's opening section: the questions users come with, answered where they look
first, each with one sentence, one figure and the numbers behind it with their intervals.

Only questions the data can answer are listed (SPEC §1):

- how many env runners, envs per runner or learners pay off (a count axis swept within
  one comparison);
- where the GPU(s) should go (``gpu_layout`` varied within one comparison);
- what CPU pinning costs (``cpu_affinity`` varied);
- which backend acts fastest and what it costs in return (``backend`` varied among
  inference cells of one workload);
- which algorithm reaches the target first (runs of two or more algorithms with a target);
- how much faster one machine is than another (the same configurations on two
  fingerprints, :mod:`rlperf.report.compare.across`).

Every comparison is made inside one comparison set (:mod:`rlperf.report.compare.workloads`),
between configurations that differ only in the axis asked about, on the set's objective;
a ratio is a speedup with its interval (:func:`rlperf.stats.intervals.speedup`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlperf.report.compare.axes import AxisPlan, format_value, within_set
from rlperf.report.compare.decided import cost_line, verdicts
from rlperf.report.compare.findings import ONE_RUN_LINE, FamilyAnalysis, level, precision_text
from rlperf.report.compare.returns import ReturnComparison
from rlperf.report.export import render
from rlperf.report.figures.answers import POINT_COLUMNS, answer_figure
from rlperf.report.result import ReportResult
from rlperf.report.sections.base import Inputs, Section
from rlperf.report.stats import estimates
from rlperf.stats import intervals
from rlperf.stats.intervals import Estimate
from rlperf.vocabulary import Family, RunStatus

#: Count axes (name in the tables -> how answers name one unit of it).
COUNT_AXES = {"workers": "env runners", "env_runner.num_envs": "envs per runner",
              "learners": "learners"}  # fmt: skip

#: Axes whose values are compared by name (axis -> the question it answers).
CHOICE_AXES = {
    "gpu_layout": "Where should the GPU(s) go?",
    "cpu_affinity": "What does CPU pinning cost?",
}


@dataclass
class Answer:
    """One question answered: a sentence, the numbers behind it and the configurations its
    figure plots (``points``: :data:`~rlperf.report.figures.answers.POINT_COLUMNS`, only the
    answer's own comparison set), drawn into ``figure`` (:func:`draw`)."""

    question: str
    sentence: str
    numbers: pd.DataFrame = field(default_factory=pd.DataFrame)
    workload: str = ""
    points: pd.DataFrame = field(default_factory=pd.DataFrame)
    xlabel: str = ""
    figure: Path | None = None
    #: What folds under the sentence (a fit's parameters): the sentence leads, in one breath.
    details: str = ""


def _fmt(e: Estimate, unit: str = "") -> str:
    def one(v: float) -> str:
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"

    unit = f" {unit}" if unit else ""
    if not np.isfinite(e.value):
        return "n/a"
    if not e.has_ci:
        return f"{one(e.value)}{unit} (no interval)"
    return f"{one(e.value)}{unit} [{one(e.low)}, {one(e.high)}]" + _mark(e)


def _ratio(e: Estimate) -> str:
    """A speedup: ``1.23× [1.20, 1.26]``, ``†`` where it rests on one run's interval."""
    if not e.has_ci:
        return f"{e.value:.2f}× (no interval)"
    return f"{e.value:.2f}× [{e.low:.2f}, {e.high:.2f}]" + _mark(e)


def _mark(e: Estimate) -> str:
    return " †" if e.one_run else ""


def _points(
    a: FamilyAnalysis, ordered: pd.DataFrame, workload: str, names: Sequence[str]
) -> pd.DataFrame:
    """The rows an answer's figure plots: its configurations, best first."""
    rows = []
    for conf, name in zip(ordered["configuration"], names, strict=True):
        e = a.estimates[conf]
        rows.append((conf, workload, name, e.value, e.low, e.high, bool(e.one_run)))
    return pd.DataFrame(rows, columns=list(POINT_COLUMNS))


def _groups(rows: pd.DataFrame, axis: str, axes: Sequence[str]) -> list[pd.DataFrame]:
    """The configurations of ``rows`` grouped by every other varying axis, groups with at
    least two values of ``axis``, most values first."""
    # One machine at a time: a configuration on another fingerprint is not the same setting.
    others = [a for a in [*axes, "fingerprint"]
              if a != axis and a in rows and rows[a].nunique(dropna=False) > 1]  # fmt: skip
    grouped = [g for _, g in rows.groupby(others, dropna=False, sort=False)] if others else [rows]
    grouped = [g for g in grouped if g[axis].nunique() >= 2]
    return sorted(grouped, key=lambda g: (-g[axis].nunique(), g["objective_value"].min()))


def _numbers(a: FamilyAnalysis, group: pd.DataFrame, axis: str, best: str) -> pd.DataFrame:
    """The numbers behind an answer: each value of ``axis`` with its objective and the best
    one's speedup over it."""
    obj = a.objective_for(best)
    out = []
    for _, r in group.sort_values("objective_value").iterrows():
        e = a.estimates[r["configuration"]]
        sp = intervals.speedup(e, a.estimates[best])
        out.append({
            axis: format_value(axis, r[axis]),
            f"{obj.label} [{level()} CI]": _fmt(e),
            "precision": precision_text(e),
            "best's speedup over it": "" if r["configuration"] == best else _ratio(sp),
        })  # fmt: skip
    return pd.DataFrame(out)


def _completed(res: ReportResult, family: str) -> pd.DataFrame:
    df = res.configurations
    if df.empty or "objective_value" not in df:
        return df.iloc[0:0]
    keep = (
        (df["family"] == family)
        & (df["status"] == RunStatus.completed)
        & df["objective_value"].notna()
    )
    return df[keep]


def axis_answers(res: ReportResult, plans: Mapping[str, AxisPlan]) -> list[Answer]:
    """Count axes and GPU / CPU choices, within each training comparison."""
    a = res.analyses.get(Family.training)
    rows = _completed(res, Family.training)
    if a is None or rows.empty or Family.training not in plans:
        return []
    axes = [x for x in plans[Family.training].axes if x in rows and x not in ("seed", "group")]
    out: list[Answer] = []
    for axis in [*COUNT_AXES, *CHOICE_AXES]:
        if axis not in axes:
            continue
        for workload, wrows in rows.groupby("workload", sort=True):
            groups = _groups(wrows, axis, axes)
            if not groups:
                continue
            out.append(_axis_answer(res, a, str(workload), axis, groups[0]))
    return out


def _axis_answer(
    res: ReportResult, a: FamilyAnalysis, workload: str, axis: str, group: pd.DataFrame
) -> Answer:
    ordered = group.sort_values("objective_value")
    best, worst = ordered.iloc[0], ordered.iloc[-1]
    obj = a.objective_for(best["configuration"])
    e_best = a.estimates[best["configuration"]]
    e_worst = a.estimates[worst["configuration"]]
    sp = intervals.speedup(e_worst, e_best)
    if axis in COUNT_AXES:
        unit = COUNT_AXES[axis]
        counts = sorted(float(v) for v in group[axis].dropna().unique())
        n_best = float(best[axis])
        pays = ("more pays off up to the most tried" if n_best == counts[-1]
                else "more does not pay off beyond it")  # fmt: skip
        sentence = (
            f"{workload}: {format_value(axis, best[axis])} is fastest of "
            f"{', '.join(f'{c:g}' for c in counts)} {unit}, {_ratio(sp)} as fast as "
            f"{format_value(axis, worst[axis])}; {pays}."
        )
        question = f"How many {unit} pay off?"
        details = " ".join([f"{format_value(axis, best[axis])}: {obj.name} "
                            f"{_fmt(e_best, obj.unit)}.",
                            *(c.text() for c in res.sections["scaling"]
                              if c.axis == axis and c.workload == workload)])  # fmt: skip
    else:
        details = f"Other settings: {_other(best, axis, res)}."
        tied = estimates.tied(e_best, e_worst)
        sentence = (
            f"{workload}: {format_value(axis, best[axis])} is fastest ({obj.name} "
            f"{_fmt(e_best, obj.unit)}); {format_value(axis, worst[axis])} is "
            + f"{_ratio(sp)} slower"
            + (", not distinguishable from it." if tied else ".")
        )
        question = CHOICE_AXES[axis]
    numbers = _numbers(a, ordered, axis, best["configuration"])
    names = [format_value(axis, v) for v in ordered[axis]]
    return Answer(question, sentence, numbers, workload, _points(a, ordered, workload, names),
                  f"{obj.name} ({obj.unit})", details=details)  # fmt: skip


def _other(row: pd.Series, axis: str, res: ReportResult) -> str:
    text = str(row["config"])
    parts = [p for p in text.split(" · ") if p != format_value(axis, row[axis])]
    return " · ".join(parts) or "none"


def backend_answers(res: ReportResult) -> list[Answer]:
    """Which backend acts fastest in each inference workload, and what it costs in return."""
    a = res.analyses.get(Family.inference)
    rows = _completed(res, Family.inference)
    if a is None or rows.empty or "backend" not in rows or rows["backend"].nunique() < 2:
        return []
    out = []
    keys = ["workload", "fingerprint"] if "fingerprint" in rows else ["workload"]
    for key, wrows in rows.groupby(keys, sort=True):
        workload = key[0] if isinstance(key, tuple) else key
        if wrows["backend"].nunique() < 2:
            continue
        ordered = wrows.sort_values("objective_value")
        best = ordered.iloc[0]
        e_best = a.estimates[best["configuration"]]
        slowest = ordered.iloc[-1]
        sp = intervals.speedup(a.estimates[slowest["configuration"]], e_best)
        label = f"{workload} · {best['config']}" if best["config"] != "all" else workload
        iqm = _iqm_rows(res, str(best.get("label") or label))
        iqm_text = _iqm_cost(iqm)
        cost = _return_cost(best, bool(iqm_text)) + iqm_text
        sentence = (
            f"{workload}: {best['backend']} acts fastest, median {_fmt(e_best, 'ms')} per "
            f"action, {_ratio(sp)} as fast as {slowest['backend']}; "
            f"{_return_word(best, iqm)}."
        )
        details = f"{best['config'][:1].upper()}{best['config'][1:]}: {cost}."
        shown = within_set(list(ordered["config"]))
        table = pd.DataFrame({
            "backend": ordered["backend"].astype(str).to_numpy(),
            "configuration": shown,
            f"median ms [{level()} CI]": [_fmt(a.estimates[c]) for c in ordered["configuration"]],
            "return": [_num(v) for v in _get(ordered, "return_mean")],
            "return diff vs reference [CI]": [_diff(r) for _, r in ordered.iterrows()],
            "fidelity": [str(v) if isinstance(v, str) else ""
                         for v in _get(ordered, "fidelity_verdict")],
        })  # fmt: skip
        out.append(Answer("Which backend acts fastest, and what does it cost in return?",
                          sentence, table, str(workload),
                          _points(a, ordered, str(workload), shown),
                          "median latency per action (ms)", details=details))  # fmt: skip
    return out


def _get(df: pd.DataFrame, col: str) -> list[Any]:
    return list(df[col]) if col in df else [None] * len(df)


def _num(v: Any) -> str:
    return "" if v is None or pd.isna(v) else f"{float(v):.3g}"


def _diff(r: pd.Series) -> str:
    d = r.get("fidelity_return_diff")
    if d is None or pd.isna(d):
        return ""
    lo, hi = r.get("fidelity_return_diff_low"), r.get("fidelity_return_diff_high")
    if lo is None or pd.isna(lo):
        return f"{float(d):+.3g}"
    return f"{float(d):+.3g} [{float(lo):+.3g}, {float(hi):+.3g}]"


#: A configuration's row of a returns comparison, its reference's row, and the comparison.
_Returns = tuple[pd.Series, pd.Series, ReturnComparison]


def _return_word(r: pd.Series, iqm: _Returns | None) -> str:
    """What the fastest backend costs in return, in a few words (the details say more): the
    paired difference from the reference policy, else the returns comparison's IQMs."""
    d = r.get("fidelity_return_diff")
    if (d is None or pd.isna(d)) and iqm is not None:
        mine, ref, _ = iqm
        return f"return IQM {mine['iqm']:.3g} against the reference's {ref['iqm']:.3g}"
    if d is None or pd.isna(d):
        ret = r.get("return_mean")
        return ("no return measured" if ret is None or pd.isna(ret)
                else "its return not compared with a reference")  # fmt: skip
    lo, hi = r.get("fidelity_return_diff_low"), r.get("fidelity_return_diff_high")
    if lo is not None and hi is not None and pd.notna(lo) and float(lo) <= 0 <= float(hi):
        text = "no measurable cost in return"
    else:
        text = f"its return differs by {_diff(r)}"
    vacuous = isinstance(r.get("fidelity_verdict"), str) and r["fidelity_verdict"] == "vacuous"
    return text + (" (a vacuous fidelity check)" if vacuous else "")


def _return_cost(r: pd.Series, compared: bool = False) -> str:
    d = r.get("fidelity_return_diff")
    verdict = r.get("fidelity_verdict")
    if d is None or pd.isna(d):
        ret = r.get("return_mean")
        if ret is None or pd.isna(ret):
            return "no return was measured"
        return f"its mean return is {float(ret):.3g}" + (
            "" if compared else " (no reference to compare with)"
        )
    lo, hi = r.get("fidelity_return_diff_low"), r.get("fidelity_return_diff_high")
    text = f"its return differs from the reference policy's by {_diff(r)}"
    if lo is not None and hi is not None and pd.notna(lo) and float(lo) <= 0 <= float(hi):
        text += " (the interval contains 0: no measurable cost)"
    if isinstance(verdict, str) and verdict == "vacuous":
        text += "; the fidelity check is vacuous, so its agreement or action error shows nothing"
    return text


def _iqm_rows(res: ReportResult, label: str) -> _Returns | None:
    """The returns comparison's rows of ``label`` and of its reference, and the comparison,
    where one holds ``label`` (:mod:`rlperf.report.compare.returns`)."""
    for rc in res.sections["returns"]:
        t = rc.table.set_index("label")
        if label not in t.index or label == rc.reference or rc.reference not in t.index:
            continue
        return t.loc[label], t.loc[rc.reference], rc
    return None


def _iqm_cost(iqm: _Returns | None) -> str:
    """The returns comparison's word (IQM against the reference's, and P(improvement))."""
    if iqm is None:
        return ""
    r, ref, rc = iqm
    return (f"; over {int(r['n'])} {rc.unit}s its return IQM is {r['iqm']:.3g} "
            f"[{r['iqm_low']:.3g}, {r['iqm_high']:.3g}] against the reference's "
            f"{ref['iqm']:.3g} [{ref['iqm_low']:.3g}, {ref['iqm_high']:.3g}], "
            f"P(improvement) {r['p_improvement']:.2f} [{r['p_improvement_low']:.2f}, "
            f"{r['p_improvement_high']:.2f}]")  # fmt: skip


def target_answer(res: ReportResult) -> list[Answer]:
    """Which algorithm (configuration) reaches the target first, where two or more algorithms
    ran to a target."""
    t = res.targets
    if t is None or t.empty or "rank" not in t:
        return []
    runs = res.runs
    algo_of = dict(zip(runs.get("configuration", []), runs.get("algo", []), strict=False))
    algos = {str(algo_of.get(c)) for c in t["configuration"] if algo_of.get(c) is not None}
    if len(algos) < 2:
        return []
    first = t.sort_values("rank").iloc[0]
    censored = " (a lower bound: runs missed)" if bool(first["time_censored"]) else ""
    sentence = (
        f"{first['label']} reaches the target {first['target']:g} first: median "
        f"{first['median_time_to_target_s']:.1f} s{censored} over {int(first['runs'])} run(s), "
        f"{int(first['reached'])} of which reached it."
    )
    shown = t[["rank", "label", "target", "reached", "runs", "median_time_to_target_s"]].copy()
    shown["median_time_to_target_s"] = shown["median_time_to_target_s"].map(lambda v: f"{v:.1f}")
    ordered = t.sort_values("rank")
    times = ordered["median_time_to_target_s"].to_numpy(dtype=float)
    points = pd.DataFrame({"configuration": ordered["configuration"].to_numpy(),
                           "workload": "", "name": ordered["label"].astype(str).to_numpy(),
                           "value": times, "low": times, "high": times,
                           "one_run": (ordered["runs"] == 1).to_numpy()})  # fmt: skip
    return [
        Answer(
            "Which algorithm reaches the target first?",
            sentence,
            shown,
            "",
            points,
            "median time to target (s; a run that missed counts at its budget)",
        )
    ]


def machine_answers(res: ReportResult) -> list[Answer]:
    """How much faster one machine runs the same configurations."""
    out = []
    for table in (t for t in res.sections["across"] if t.kind == "machines"):
        cols = [c for c in table.rows.columns if " over " in c]
        for col in cols:
            sps = [e for e in table.rows[col] if isinstance(e, Estimate)]
            if not sps:
                continue
            values = np.array([e.value for e in sps])
            faster = sum(e.has_ci and e.low > 1 for e in sps)
            slower = sum(e.has_ci and e.high < 1 for e in sps)
            other, first = col.split(" over ")
            sentence = (
                f"{table.family}: on {len(sps)} configuration(s) measured on both, {other} is "
                f"{np.median(values):.2f}× as fast as {first} (median; range "
                f"{values.min():.2f}–{values.max():.2f}×); faster in {faster}, slower in "
                f"{slower}, not distinguishable in {len(sps) - faster - slower}."
            )
            details = ("Fingerprint fields that differ: "
                       + (", ".join(table.notes[:6]) or "none") + ".")  # fmt: skip
            out.append(Answer("Which machine is faster?", sentence, details=details))
    return out


def answers(res: ReportResult, plans: Mapping[str, AxisPlan]) -> list[Answer]:
    """Every question the data can answer, in the order the section shows them."""
    return [*axis_answers(res, plans), *backend_answers(res), *target_answer(res),
            *machine_answers(res)]  # fmt: skip


def draw(found: Sequence[Answer], out: Path) -> dict[str, Path]:
    """Each answer's figure (``answer_<n>``), of its own points only."""
    drawn: dict[str, Path] = {}
    for n, x in enumerate(found, start=1):
        if len(x.points) < 2:
            continue
        title = f"{x.question} {x.workload}".strip()
        x.figure = answer_figure(x.points, title, x.xlabel, out, f"answer_{n}")
        drawn[x.figure.stem] = x.figure
    return drawn


def answers_section(inputs: Inputs) -> list[render.Block]:
    """The "Answers" section: one sentence, one figure and the numbers per answer (nothing
    when the data answers no question)."""
    res, plans = inputs.result, inputs.plans
    found: list[Answer] = inputs.data("answers")
    sure = verdicts(res.analyses, plans)
    cost = cost_line(res.cells)
    if not found and not sure:
        return []
    blocks: list[render.Block] = [render.Heading("Answers", 2)]
    if sure:
        points = [(v.headline, f"{v.headline} {v.text}") for v in sure]
        points += [(c, c) for v in sure for c in v.closed] + ([(cost, cost)] if cost else [])
        blocks.append(render.Points(points))
    for question in dict.fromkeys(x.question for x in found):
        these = [x for x in found if x.question == question]
        blocks.append(render.Heading(question, 3))
        blocks.append(render.Points([(x.sentence, f"{x.sentence} {x.details}".strip())
                                     for x in these]))  # fmt: skip
        for x in these:
            if not x.numbers.empty:
                blocks.append(render.Table(x.numbers))
            if x.figure is not None:
                blocks.append(render.Image(x.figure, f"{x.workload or question}: the "
                                           "configurations this answer compares, with their "
                                           f"{level()} intervals"))  # fmt: skip
    if any("†" in x.sentence for x in found):
        blocks.append(render.Para(ONE_RUN_LINE))
    return blocks


SECTION = Section(
    name="answers",
    title="Answers",
    order=20,
    needs=(
        "configurations",
        "analyses",
        "figures",
        "targets",
        "runs",
        "plans",
        "scaling",
        "returns",
        "across",
        "cells",
    ),
    render=answers_section,
    collect=lambda inputs: answers(inputs.result, inputs.plans),
    draw=draw,
    listed=False,
)
