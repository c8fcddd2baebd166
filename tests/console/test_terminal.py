"""What a person sees on the terminal (rlperf.console) and what the job log keeps."""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from rlperf.cli import expand_verbose_flag
from rlperf.console import TERMINAL, Console, terminal_session
from rlperf.console.capture import OutputCapture
from rlperf.console.filters import TerminalFilter
from rlperf.console.progress import RunProgress
from rlperf.console.text import header_lines, summary_lines
from rlperf.results.record import RunRecord
from tests.conftest import TERMINAL_FILE

# Lines Ray 2.60 / RLlib print in every quickstart (before this console: 80 of 99 lines).
TF_LINE = (
    "2026-11-30 14:40:44,477\tWARNING framework.py:157 -- "
    "Not importing TensorFlow for test purposes"
)
TOKEN_LINE = (
    "2026-11-30 14:40:29,308\tWARNING authentication_token_setup.py:85 -- Token authentication "
    "is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled to opt out."
)
CONSTRUCTOR_LINE = (
    "[2026-11-30 14:40:48,925 E 18605 18605] core_worker.cc:2465: Actor with class name: "
    "'SingleAgentEnvRunner' and ID: '65169e5b95711bd2dac169b501000000' has constructor "
    "arguments in the object store and max_restarts > 0."
)
RAY_ERROR = (
    "2026-11-30 15:30:28,095\tERROR actor_manager.py:976 -- Ray error (The actor "
    "0c5f4b919ef00be70f74797001000000 is unavailable), taking actor 1 out of service."
)
SHM_LINE = (
    "2026-11-30 15:30:28,095\tWARNING services.py:2000 -- WARNING: The object store is using "
    "/tmp instead of /dev/shm because /dev/shm has only 67108864 bytes available."
)


def test_filter_shows_errors_and_what_matters_once_and_hides_the_rest() -> None:
    f = TerminalFilter()
    assert not f.shows(TF_LINE)
    assert not f.shows(TOKEN_LINE)
    assert not f.shows("A.L.E: Arcade Learning Environment (version 0.12.1+8a8fafb)")
    assert not f.shows(CONSTRUCTOR_LINE)  # an "E" line Ray prints on every run
    # The serve job's own shutdown of Serve (seen after a standalone serve run), not a
    # worker that died: hidden; a replica killed by a fault level is still shown.
    assert not f.shows(
        "\x1b[33m(raylet)\x1b[0m Task ServeController.graceful_shutdown failed. There are "
        "infinite retries remaining, so the task will be retried. Error: The actor is dead "
        "because it was killed by `ray.kill`."
    )
    assert f.shows("(raylet) A worker died or was killed while executing a task")
    assert f.shows(RAY_ERROR)
    # The same error again, another time stamp and actor id: not repeated.
    assert not f.shows(RAY_ERROR.replace("15:30:28,095", "15:31:02,001").replace("0c5f", "ffff"))
    assert f.shows(SHM_LINE)
    traceback = ["Traceback (most recent call last):", '  File "x.py", line 1', "KeyError: 'a'"]
    assert [f.shows(line) for line in traceback] == [True, True, True]
    assert not f.shows("after the traceback, an info line")
    verbose = TerminalFilter(verbose=True)
    assert all(verbose.shows(line) for line in (TF_LINE, TOKEN_LINE, TF_LINE, CONSTRUCTOR_LINE))


def test_capture_logs_everything_and_passes_the_filtered_lines(tmp_path: Path) -> None:
    log_path = tmp_path / "job.log"
    seen: list[tuple[int, str]] = []
    f = TerminalFilter()
    with OutputCapture(log_path, f.shows, lambda fd, line: seen.append((fd, line))):
        os.write(2, (TF_LINE + "\n").encode())
        os.write(2, (TF_LINE + "\n" + RAY_ERROR + "\n").encode())
        os.write(1, b"plain stdout line\n")
        # A child process writes to the same descriptors (as Ray's C++ core and the ALE do).
        subprocess.run([sys.executable, "-c", f"import sys; sys.stderr.write({SHM_LINE!r})"])
    log = log_path.read_text()
    assert log.count("Not importing TensorFlow") == 2 and "[stdout] plain stdout line" in log
    assert "[stderr] " + SHM_LINE in log
    assert seen == [(2, RAY_ERROR), (2, SHM_LINE)]
    # The descriptors are back: this reaches pytest's capture, not the log.
    os.write(2, b"after\n")
    assert "after" not in log_path.read_text()


def test_run_progress_plain_lines_and_eta() -> None:
    out = io.StringIO()
    console = Console(stream=out, interactive=False)
    with RunProgress(console, "train", 4) as progress:
        progress.started -= 40.0  # the run started 40 s ago,
        progress.opened -= 30.0  # its first two iterations took 30 s
        progress.update(2, "2.0 s (sample 1.0)")
    line = out.getvalue().strip()
    assert re.fullmatch(r"\[train\s+40s\] iteration 2/4: 2\.0 s \(sample 1\.0\) \| ETA 30s", line)
    # A cap of 1000 iterations that a budget ends at a quarter after 10 of them:
    # the ETA follows the budget (3 x the 30 s so far), not the cap.
    out = io.StringIO()
    with RunProgress(Console(stream=out, interactive=False), "train", 1000) as progress:
        progress.opened -= 30.0
        progress.update(10, "x", fraction=0.25)
    assert out.getvalue().strip().endswith("iteration 10/1000: x | ETA 1m30s")
    quiet = io.StringIO()
    with RunProgress(Console("quiet", stream=quiet, interactive=False), "train", 2) as progress:
        progress.update(1, "x")
    assert quiet.getvalue() == ""


def test_log_records_reach_the_terminal_by_verbosity(tmp_path: Path) -> None:
    log = logging.getLogger("rlperf.test_terminal")
    # A third-party logger of its own: absl's carries what TensorFlow, imported by earlier
    # tests, and in-process Hydra runs (tests/cli/test_exit_codes.py) left on it.
    other = logging.getLogger("thirdparty_test_terminal")
    root = logging.getLogger()
    for verbosity, shown in (("normal", ["rlperf: careful"]), ("verbose", None)):
        stream = io.StringIO()
        with terminal_session(verbosity, tmp_path / f"{verbosity}.log") as console:
            console.stream, console.interactive = stream, False
            log.info("an info line")
            log.info("a progress line", extra={TERMINAL: False})
            log.warning("careful")
            other.warning("third-party chatter")
        lines = stream.getvalue().splitlines()
        if shown is not None:
            assert lines == shown
        else:
            assert "rlperf: an info line" in lines and "rlperf: careful" in lines
            assert "WARNING thirdparty_test_terminal: third-party chatter" in lines
            assert not any("progress line" in line for line in lines)
        text = (tmp_path / f"{verbosity}.log").read_text()
        assert "an info line" in text and "a progress line" in text and "third-party" in text
    assert not any(type(h).__name__ == "TerminalHandler" for h in root.handlers)


def test_verbose_flag_is_the_verbosity_override() -> None:
    assert expand_verbose_flag(["-v", "model=tiny"]) == ["verbosity=verbose", "model=tiny"]
    assert expand_verbose_flag(["--verbose"]) == ["verbosity=verbose"]
    assert expand_verbose_flag(["model=tiny"]) == ["model=tiny"]


@pytest.mark.parametrize(
    ("overrides", "env"),
    [
        (["env=pong", "env.id=ALE/Breakout-v5"], "ALE/Breakout-v5"),
        (["env=gym", "env.id=Acrobot-v1", "model=mlp64"], "Acrobot-v1"),
        (["env=cartpole", "model=mlp64"], "CartPole-v1"),
        (["env=custom", "env.entry_point=my_envs.grid:GridWorld", "model=mlp64"],
         "my_envs.grid:GridWorld"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("stage", ["train", "env"])
def test_header_names_the_env_of_every_kind(
    compose_cfg, overrides: list[str], env: str, stage: str
) -> None:
    """An Atari or gymnasium env by its id, a user's env class by its entry point."""
    head = header_lines(compose_cfg(f"stage={stage}", *overrides), Path("/out/run"), None)[0]
    assert head.startswith(f"rlperf {stage}: ")
    assert [p for p in head.split() if p.startswith("env=")] == [f"env={env}"]


def test_header_and_summary_name_what_ran_and_what_it_measured(compose_cfg) -> None:
    cfg = compose_cfg("model=tiny", "workers=2")
    head = header_lines(cfg, Path("/out/run"), Path("/out/run/rlperf.log"))
    assert head[0] == (
        "rlperf train: model=tiny env=ALE/Pong-v5 algo=ppo workers=2 gpu_layout=none "
        "cpu_affinity=unrestricted iterations=3"
    )
    assert head[1] == "  results: /out/run (log: rlperf.log)"
    summary = {
        "status": "completed",
        "wall_s": 75.0,
        "iterations": 3,
        "excluded": {"warmup": 1, "fault": 1},
        "faults": [{"iteration": 3}],
        "metrics": {"iter_s": {"mean": 5.25}, "env_steps_per_s": {"mean": float("nan")}},
    }
    lines = summary_lines(RunRecord(summary), Path("/out/run"))
    assert (
        lines[0]
        == "completed in 1m15s: 3 iteration(s) (excluded from the figures: 1 fault, 1 warmup)"
    )
    assert lines[1] == "  iteration 5.25 s (mean)"  # no NaN figures
    assert "1 fault(s) recorded" in lines[2]
    # A serve job's faults are the replicas it killed: none, no line (not "2 faults").
    serve = {"status": "completed", "stage": "serve", "wall_s": 69.0,
             "faults": {"replicas_killed": [], "levels": []}}  # fmt: skip
    assert not any("fault" in line for line in summary_lines(RunRecord(serve), Path("/out/serve")))
    serve["faults"] = {"replicas_killed": ["SERVE_REPLICA::a"], "levels": [3]}
    assert "1 fault(s) recorded" in summary_lines(RunRecord(serve), Path("/out/serve"))[-2]
    # A serve job's headline: levels, the policy over HTTP, the max rate, the actions' check.
    serve = {"status": "completed", "stage": "serve", "wall_s": 57.0, "levels": 11,
             "requests": 3730, "excluded": {"warmup": 330},
             "baseline": {"http_p50_ms": 6.7251, "inprocess_p50_ms": 0.05},
             "max_rate_under_slo": {"slo_ms": 20.0, "max_rate_rps": None, "bounded": True,
                                    "levels_searched": [25.0, 50.0, 100.0]},
             "actions": {"checked": 2840, "mismatches": 0, "max_err_of_range": 0.0}}  # fmt: skip
    lines = summary_lines(RunRecord(serve), Path("/out/serve"))
    assert lines[:2] == [
        "completed in 57s: 11 level(s), 3730 request(s) (excluded from the figures: 330 warmup)",
        "  http p50 6.73 ms (1 client) | max rate with p99 within 20 ms: none of 25-100 req/s"
        " | 2840 action(s) checked, 0 mismatch(es) (max error 0 of the range)",
    ]
    serve["max_rate_under_slo"].update(max_rate_rps=50.0)  # type: ignore[attr-defined]
    assert "within 20 ms: 50 req/s |" in summary_lines(RunRecord(serve), Path("/out/serve"))[1]
    serve["max_rate_under_slo"].update(max_rate_rps=100.0, bounded=False)  # type: ignore[attr-defined]
    assert (
        "within 20 ms: 100 req/s or more |"
        in summary_lines(RunRecord(serve), Path("/out/serve"))[1]
    )
    cfg = compose_cfg("stage=serve", "run=/runs/a", "backend=tflite_int8")
    assert header_lines(cfg, Path("/out/serve"), None)[0] == (
        "rlperf serve: run=/runs/a backend=tflite_int8"
    )
    # A downstream job counts steps and episodes, not the iterations it never ran.
    edge = {"status": "completed", "stage": "edge", "wall_s": 27.0, "iterations": 0,
            "steps": 6612, "episodes": {"count": 10}, "excluded": {"warmup": 50}}  # fmt: skip
    assert summary_lines(RunRecord(edge), Path("/out/edge"))[0] == (
        "completed in 27s: 6612 step(s), 10 episode(s) (excluded from the figures: 50 warmup)"
    )


@pytest.mark.slow
def test_quickstart_terminal_is_short_and_repeats_nothing(tiny_run: Path) -> None:
    """The tiny quickstart's terminal (stdout and stderr): before rlperf.console, 93 lines,
    80 of them RLlib's 'Not importing TensorFlow' line and every iteration twice."""
    text = (tiny_run.parent / TERMINAL_FILE).read_text()
    lines = [line for line in text.splitlines() if line.strip()]
    progress = [line for line in lines if re.match(r"\[train\s", line)]
    assert [re.search(r"iteration (\d)/2", line)[1] for line in progress] == ["1", "2"]  # type: ignore[index]
    others = [line for line in lines if line not in progress]
    assert len(others) <= 15, text
    assert others[0].startswith("rlperf train: model=tiny") and f"results: {tiny_run}" in others[1]
    assert any(line.startswith("completed in") for line in others), text
    stamp = re.compile(r"^\[?\d{4}-\d\d-\d\d[ T][\d:,.]+\]?\s*")
    repeats = Counter(stamp.sub("", line) for line in lines)
    assert max(repeats.values()) <= 2, repeats.most_common(3)
    # Nothing is lost: the job log has the third-party lines the terminal left out.
    log = (tiny_run / "rlperf.log").read_text()
    assert log.count("Not importing TensorFlow for test purposes") == 1
    assert "Token authentication is enabled" in log and "iteration 2/2" in log
    assert "Token authentication" not in text
