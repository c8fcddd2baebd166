"""A truncated or corrupt checkpoint given to rollout, edge or serve is refused before any
work (no Ray, no export, no server), naming the file (issue 28, point 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlperf.layout import (
    CHECKPOINT_DIR,
    FINGERPRINT_FILE,
    POLICY_FILE,
    SUMMARY_FILE,
    TELEMETRY_FILE,
)
from tests.conftest import run_rlperf
from tests.support.run_folders import make_run

#: What each corruption does to the run folder, and what the refusal then says.
CORRUPTIONS = {
    "truncated policy": (POLICY_FILE, lambda b: b[:100], "is truncated or not a torch file"),
    "garbage policy": (POLICY_FILE, lambda b: b"\x00" * len(b), "is truncated or not a torch file"),
}


@pytest.mark.parametrize("stage", ["rollout", "edge", "serve"])
@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_a_corrupt_checkpoint_is_refused_before_work(
    tmp_path: Path, stage: str, corruption: str
) -> None:
    name, damage, said = CORRUPTIONS[corruption]
    run = make_run(tmp_path)
    broken = run / CHECKPOINT_DIR / name
    broken.write_bytes(damage(broken.read_bytes()))
    out = tmp_path / "out"
    proc = run_rlperf([f"stage={stage}", f"run={run}", f"hydra.run.dir={out}"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"rlperf: {broken} {said}"), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["status"] == "invalid" and str(broken) in summary["error"]
    # Nothing was measured: the job wrote only its summary, fingerprint and log.
    assert {p.name for p in out.iterdir() if not p.name.startswith(".")} <= {
        SUMMARY_FILE,
        FINGERPRINT_FILE,
        "rlperf.log",
        TELEMETRY_FILE,
    }
