"""A full disk while results are written (issue 28, point 3): the rows written before stay
whole, and the job ends with one line naming the file. The disk is /dev/full (the kernel's
device that refuses every write with ENOSPC), so those tests run everywhere; one more fills
a small tmpfs mid-run where this machine lets the test mount one."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.live_run import LiveRun, csv_rows

from rlperf.errors import ResultsWriteError
from rlperf.layout import METRICS_FILE, SUMMARY_FILE
from rlperf.results.csvlog import CsvLog
from tests.conftest import TINY_TRAIN, run_rlperf

pytestmark = pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")


def test_a_row_the_disk_refuses_keeps_the_rows_before(tmp_path: Path) -> None:
    path = tmp_path / METRICS_FILE
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
    (out / METRICS_FILE).symlink_to("/dev/full")
    args = [*TINY_TRAIN, "workers=0", "train.env_ceiling.enabled=false", f"hydra.run.dir={out}"]
    proc = run_rlperf(args, cwd=tmp_path, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"rlperf: cannot write its header of {out / METRICS_FILE}: No space left on device; "
        f"it is empty"
    )
    assert "Traceback" not in proc.stderr
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["status"] == "failed"
    assert summary["error"].startswith("ResultsWriteError: cannot write its header")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of 8 MiB mounted at a folder of ``tmp_path`` (root, or CAP_SYS_ADMIN), else
    the test is skipped with the reason."""
    mount_at = tmp_path / "disk"
    mount_at.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount_at)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mount_at
    finally:
        subprocess.run(["umount", "-l", str(mount_at)], check=False)


def _fill(disk: Path) -> None:
    """Write a file until the disk refuses (ENOSPC)."""
    with open(disk / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


@pytest.mark.slow
@pytest.mark.timing
def test_a_training_job_whose_disk_fills_mid_run_ends_with_one_line(
    tmp_path: Path, small_disk: Path
) -> None:
    """The run's folder on a small tmpfs, filled by the test after iteration 2: whichever
    write meets the full disk first (a row, the checkpoint, the summary), the job ends with
    one line, the rows written stay whole, and no half-written file is left beside them."""
    out = small_disk / "run"
    args = [a for a in TINY_TRAIN if not a.startswith(("train.iterations", "workers"))]
    args += ["workers=0", "train.iterations=6", "train.env_ceiling.enabled=false"]
    with LiveRun([*args, f"hydra.run.dir={out}"], tmp_path) as run:
        assert run.wait_until(lambda: csv_rows(out / METRICS_FILE) >= 2, 300), run.output
        _fill(small_disk)
        rc = run.finish(timeout=300)
    err = run.output
    assert rc == 1, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("rlperf: ") and "No space left on device" in last, err[-3000:]
    assert "Traceback" not in err
    metrics = (out / METRICS_FILE).read_text().splitlines()
    width = len(metrics[0].split(","))
    assert len(metrics) >= 3 and all(len(line.split(",")) == width for line in metrics)
    assert not list(out.rglob("*.tmp"))
