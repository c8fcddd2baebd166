"""The report's tidy tables are built whole, so that ``rlperf-report`` prints no library
warnings: a column replaced with a new dtype one at a time leaves a block per column,
and pandas warns ``PerformanceWarning: DataFrame is highly fragmented`` at the next
column inserted into a frame of over 100 such blocks (the figures insert one)."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import THESIS

from rlperf.report.build import build_report
from rlperf.report.tables.tidy import _coerce, _typed

#: A training sweep's folder of the thesis data: eight runs, figures of every kind.
VOLTA1_DEF = THESIS / "ray_results" / "volta1_def"


def _numpy_blocks(df: pd.DataFrame) -> int:
    """The frame's non-extension blocks: what pandas counts before it warns."""
    return sum(not block.is_extension for block in df._mgr.blocks)


def _numpy_dtypes(df: pd.DataFrame) -> int:
    """The frame's distinct numpy dtypes: the fewest non-extension blocks it can have."""
    return len({dt for dt in df.dtypes if not isinstance(dt, pd.api.extensions.ExtensionDtype)})


def _inserts_quietly(df: pd.DataFrame) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df.assign(inserted=0.0)
        df.insert(0, "inserted", 0.0)


def test_coerced_axis_columns_stay_one_block_per_dtype() -> None:
    """150 axis columns (120 float, 10 int, 10 text, 10 boolean leaves), as a sweep over
    many float config leaves gives, come back typed in one float block."""
    kinds = {"f": (120, [0.5, None, 2.0]), "i": (10, [1, 2, 3]), "s": (10, ["a", None, "c"]),
             "b": (10, [True, None, False])}  # fmt: skip
    rows = [{f"{k}{i}": values[r] for k, (n, values) in kinds.items() for i in range(n)}
            for r in range(3)]  # fmt: skip
    df = pd.DataFrame(rows)
    out = _coerce(df, list(df.columns))
    assert out.shape == (3, 150)
    assert {str(out[f"{k}0"].dtype) for k in kinds} == {"float64", "Int64", "string", "boolean"}
    assert out["f7"].tolist()[0] == 0.5 and np.isnan(out["f7"].iloc[1])
    assert out["s3"].tolist() == ["a", pd.NA, "c"]
    assert _numpy_blocks(out) == 1
    _inserts_quietly(out)


def test_typed_summary_columns_leave_the_float_block_whole() -> None:
    """Casting ``repeats``, ``rank_in_workload``, ``workload`` ... among 150 float columns
    does not split the float block around each of them."""
    named = ["repeats", "rank_in_workload", "runs", "fidelity_flagged", "workload", "objective"]
    cols = [f"x{i}" for i in range(150)]
    for n, name in enumerate(named):
        cols[10 + 20 * n] = name
    df = pd.DataFrame(np.ones((4, len(cols))), columns=cols)
    df["workload"] = df["objective"] = "w"
    df["fidelity_flagged"] = True
    out = _typed(df)
    assert [str(out[c].dtype) for c in named] == [
        "Int64", "Int64", "Int64", "boolean", "string", "string"]  # fmt: skip
    assert list(out.columns) == cols
    assert _numpy_blocks(out) == 1
    _inserts_quietly(out)


@pytest.mark.slow
def test_report_over_a_training_sweep_warns_of_nothing(tmp_path: Path) -> None:
    """A whole report with figures records no warning, and every figure is drawn or
    skipped for a reason (none failed); its tables hold one block per numpy dtype."""
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = build_report([VOLTA1_DEF], out=tmp_path / "report", figures=True)
    assert [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught] == []
    assert res.figures and not {
        k: v for k, v in res.figures_skipped.items() if v.startswith("failed")
    }
    for name in ("runs", "configurations", "iterations"):
        df = getattr(res, name)
        assert len(df) and _numpy_blocks(df) == _numpy_dtypes(df), name
    assert time.perf_counter() - start < 60
