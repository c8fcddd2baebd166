"""A full disk while results are written (issue 28, point 3): the rows written before stay
whole, and the job ends with one line naming the file. The disk is /dev/full (the kernel's
device that refuses every write with ENOSPC), so the test runs everywhere."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rlperf.errors import ResultsWriteError
from rlperf.results.csvlog import CsvLog
from tests.conftest import TINY_TRAIN, run_rlperf

pytestmark = pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")


def test_a_row_the_disk_refuses_keeps_the_rows_before(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    log = CsvLog(path, ["iteration", "iter_s"])
    log.write({"iteration": 1, "iter_s": 0.5})
    log.write({"iteration": 2, "iter_s": 0.25})
    # From now on the file's descriptor writes to the full disk.
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, log._file.fileno())
    os.close(full)
    with pytest.raises(ResultsWriteError) as err:
        log.write({"iteration": 3, "iter_s": 0.125})
    assert str(err.value) == (
        f"cannot write row 3 of {path}: No space left on device; the 2 row(s) before it are "
        f"in the file"
    )
    log.close()  # nothing more to flush: the refused row was dropped
    assert path.read_text() == "iteration,iter_s\n1,0.5\n2,0.25\n"


@pytest.mark.slow
def test_a_training_job_on_a_full_disk_ends_with_one_line(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.csv").symlink_to("/dev/full")
    args = [*TINY_TRAIN, "workers=0", "train.env_ceiling.enabled=false", f"hydra.run.dir={out}"]
    proc = run_rlperf(args, cwd=tmp_path, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"rlperf: cannot write its header of {out / 'metrics.csv'}: No space left on device; "
        f"it is empty"
    )
    assert "Traceback" not in proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed"
    assert summary["error"].startswith("ResultsWriteError: cannot write its header")
