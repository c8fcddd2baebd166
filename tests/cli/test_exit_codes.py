"""The exit-code contract (docs/exit-codes.md) of the ``rlperf`` command, end to end in-process.

``rlperf.cli.main`` runs here as from the shell (Hydra parses ``sys.argv``); the
cases need no Ray, so they take a second each. Refusals of training before Ray
starts (``workers=-1``, ``gpu_layout=gpu0``) and the rollout GPU skip run as
subprocesses in tests/training/test_training.py and tests/rollout/test_rollout.py.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig

from rlperf import cli, stages
from rlperf.config import schema
from rlperf.errors import (
    ExitCode,
    RunFault,
    SweepIncomplete,
    UserError,
    error_line,
    exit_code_of,
    run_command,
)
from rlperf.layout import SUMMARY_FILE


def run_cli(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str]:
    """``rlperf <args>``: (exit status, everything it printed)."""
    for var in ("HYDRA_FULL_ERROR", "RLLIB_TEST_NO_TF_IMPORT", "TF_CPP_MIN_LOG_LEVEL"):
        monkeypatch.setenv(var, "")  # restored after the test; main() sets its own
        monkeypatch.delenv(var)
    monkeypatch.setattr(sys, "argv", ["rlperf", *args])
    absl_logging = sys.modules.get("absl.logging")
    if absl_logging is not None:
        # TensorFlow, imported by an earlier test, left absl's handler on the root logger with
        # the sys.stderr of that time (pytest's capture). Hydra's logging setup closes every
        # handler, and absl's closes its stream unless it is the current sys.stderr.
        handler = absl_logging.get_absl_handler().python_handler
        monkeypatch.setattr(handler, "stream", sys.stderr)
    # hydra_restore_singletons gives each test a fresh ConfigStore: register the schema again.
    monkeypatch.setattr(schema, "_registered", False)
    with pytest.raises(SystemExit) as ended:
        cli.main()
    out = capfd.readouterr()
    return int(ended.value.code), out.out + out.err  # type: ignore[arg-type]


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


# A stage's entry point for the cases no real input reaches cheaply: what the stage raises.
RAISES: dict[str, BaseException] = {}


def raising_stage(cfg: DictConfig, out_dir: Path, ctx: Any) -> dict[str, Any]:
    raise RAISES["exc"]


@pytest.mark.usefixtures("hydra_restore_singletons")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["stage=rollout"], "rlperf: stage=rollout needs run=<training job folder>"),
        (["stage=rollout", "run={tmp}/missing"], "rlperf: run={tmp}/missing: no such folder"),
        (["stage=edge", "model_path={tmp}/none.tflite"], "rlperf: model_path={tmp}/none.tflite"),
        (["stage=foo"], "rlperf: Error merging override stage=foo: Invalid value 'foo'"),
        (
            ["model=nope"],
            "rlperf: In 'config': Could not find 'model/nope'; choose one of "
            "mlp256, mlp64, model1,",
        ),
        (
            ["algo=td3"],
            "; choose one of appo, dqn, impala, ppo, sac, tqc; TD3 left RLlib in 2.8 "
            "(moved to rllib_contrib) and is gone since 2.9, so rlperf has no "
            "algo=td3: for continuous control use algo=sac (or tqc, ppo, appo, impala)",
        ),
        (["algo=trpo"], "; RLlib never had TRPO, so rlperf has no algo=trpo"),
        (["nokey=1"], "rlperf: Could not override 'nokey'."),
    ],
)
def test_user_errors_exit_2_with_one_message(
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
    args: list[str],
    message: str,
) -> None:
    out = tmp_path / "run"
    argv = [a.format(tmp=tmp_path) for a in args]
    code, printed = run_cli(monkeypatch, capfd, *argv, f"hydra.run.dir={out}")
    assert code == ExitCode.user_error == 2, printed
    assert "Traceback" not in printed and "Error executing job" not in printed
    assert message.format(tmp=tmp_path) in printed
    if (out / SUMMARY_FILE).exists():  # a job started: its folder says why it stopped
        summary = json.loads((out / SUMMARY_FILE).read_text())
        assert summary["status"] == "invalid" and summary["error"]
        assert last_line(printed).startswith("rlperf: ")


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_a_mujoco_env_without_mujoco_is_refused_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The mujoco package absent (an import that fails, as on a machine without the extra):
    one line naming the pip command, before Ray starts, and the job's folder says why."""
    monkeypatch.setitem(sys.modules, "mujoco", None)  # `import mujoco` raises ImportError
    out = tmp_path / "run"
    code, printed = run_cli(
        monkeypatch, capfd, "env=mujoco", "env.id=Hopper-v5", "model=mlp64", "algo=sac",
        f"hydra.run.dir={out}",
    )  # fmt: skip
    assert code == ExitCode.user_error, printed
    assert "Traceback" not in printed
    line = last_line(printed)
    assert line.startswith("rlperf: env.id=Hopper-v5 is a MuJoCo env, and the mujoco package")
    assert line.endswith("install it with: pip install 'rlperf[mujoco]'")
    assert json.loads((out / SUMMARY_FILE).read_text())["status"] == "invalid"


@pytest.mark.usefixtures("hydra_restore_singletons")
@pytest.mark.parametrize(
    ("exc", "code", "status", "traceback"),
    [
        (RuntimeError("a bug"), ExitCode.failed, "failed", True),
        (RunFault("iteration 3: 1 env runner(s) lost (train.on_fault=fail)"), 1, "failed", False),
        (KeyboardInterrupt(), ExitCode.interrupted, "interrupted", False),
    ],
)
def test_failures_exit_1_and_ctrl_c_130(
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
    exc: BaseException,
    code: int,
    status: str,
    traceback: bool,
) -> None:
    raising = replace(stages.STAGES["train"], entry=f"{__name__}:raising_stage")
    monkeypatch.setitem(stages.STAGES, "train", raising)
    monkeypatch.setitem(RAISES, "exc", exc)
    out = tmp_path / "run"
    got, printed = run_cli(monkeypatch, capfd, "telemetry.enabled=false", f"hydra.run.dir={out}")
    assert got == code, printed
    # Unexpected exceptions keep their traceback; rlperf's own reports are one line.
    assert ("Traceback" in printed) is traceback
    expected = {
        RuntimeError: "rlperf: failed: RuntimeError: a bug",
        RunFault: f"rlperf: {exc}",
        KeyboardInterrupt: "rlperf: interrupted (Ctrl-C); completed rows and cells are kept",
    }
    assert last_line(printed) == expected[type(exc)]
    assert json.loads((out / SUMMARY_FILE).read_text())["status"] == status


def test_exit_status_by_exception_type(capfd: pytest.CaptureFixture[str]) -> None:
    from rlperf.errors import CheckpointError, ConfigError, InfeasibleError, SkipCell

    for user_error in (ConfigError, InfeasibleError, CheckpointError, SkipCell):
        assert issubclass(user_error, UserError) and exit_code_of(user_error("x")) == 2
    assert exit_code_of(SweepIncomplete("2 failed", ExitCode.failed)) == 1
    assert exit_code_of(SweepIncomplete("1 invalid", ExitCode.user_error)) == 2
    assert exit_code_of(ValueError("x")) == 1 and exit_code_of(KeyboardInterrupt()) == 130
    assert run_command(lambda: None) == 0

    def incomplete() -> None:
        raise SweepIncomplete("sweep of 3 cells: 1 failed", ExitCode.failed)

    assert run_command(incomplete) == 1
    assert capfd.readouterr().err == "rlperf: sweep of 3 cells: 1 failed\n"


def test_error_line_names_the_cause_of_a_bare_wrapper() -> None:
    """RLlib re-raises an env's error as ``RuntimeError from e``: the line names the cause."""

    def env_step() -> None:
        raise ValueError("the env broke")

    try:
        try:
            env_step()
        except ValueError as e:
            raise RuntimeError from e
    except RuntimeError as wrapped:
        assert error_line(wrapped) == "RuntimeError (from ValueError: the env broke)"
    assert error_line(KeyError("k")) == "KeyError: 'k'"
    assert error_line(RuntimeError()) == "RuntimeError"
