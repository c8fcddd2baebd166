"""rlperf's exit-code contract and the errors it explains itself (docs/exit-codes.md).

Every command maps what ended it to one exit status *by exception type*:

- ``0`` completed (a sweep also when some cells were only skipped);
- ``1`` failed: an unexpected exception (its traceback is printed and kept in
  ``summary.json``), or a sweep in which a cell failed;
- ``2`` user error: a :class:`UserError` (a wrong config, a run this machine
  cannot run, a missing or wrong checkpoint, an unknown environment), printed
  as one line without a traceback;
- ``128 + signal`` interrupted: ``130`` Ctrl-C (SIGINT), ``143`` SIGTERM (what SLURM,
  Kubernetes and ``timeout`` send), ``129`` SIGHUP (a closed terminal or ssh session).
  All three stop a command the same way (:func:`interrupt_reason`); a second one
  ends it at once.

A stage signals a user error by raising a subclass of :class:`UserError`
(``ConfigError``, ``InfeasibleError``, ``CheckpointError``, ``SkipCell``, ...);
no stage decides exit codes itself. This module imports nothing heavy: every
stage, the launcher and the report import it.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    """The exit statuses of ``rlperf`` and ``rlperf-report``."""

    completed = 0
    failed = 1
    user_error = 2
    interrupted = 130  # 128 + SIGINT (Ctrl-C)
    hangup = 129  # 128 + SIGHUP
    terminated = 143  # 128 + SIGTERM


class ReportedError(Exception):
    """An error rlperf explains in its message: printed as ``rlperf: <message>``, no traceback.

    ``exit_code`` says which status of :class:`ExitCode` the command ends with.
    """

    exit_code: int = ExitCode.failed


class UserError(ReportedError):
    """What was asked cannot be done as asked; the message names the key, value or path.

    Base of the config, feasibility, checkpoint and environment errors of every
    stage; the command exits with :attr:`ExitCode.user_error`.
    """

    exit_code = ExitCode.user_error


class ConfigError(UserError, ValueError):
    """An invalid value or combination of values in the composed config (exit 2)."""


class EnvCheckError(ConfigError):
    """The env of the config would fail training; the message names the env and the call
    (``rlperf.envs.check``)."""


class EntryPointError(ImportError):
    """``env.entry_point`` does not name an importable class; the message says why
    (``rlperf.envs.entry_point``)."""


class ConvStackError(ValueError):
    """A ``model.conv_filters`` stack that does not reduce the input to 1x1
    (``rlperf.models.shapes``)."""


class ModelSpaceError(ValueError):
    """The model cannot take the env's observations or produce its actions
    (``rlperf.models.spaces``)."""


class CheckpointError(UserError, ValueError):
    """A run folder or checkpoint that cannot be used; the message says why and where (exit 2)."""


class PolicyLoadError(ValueError):
    """A policy file that is missing, truncated, or of another format/model
    (``rlperf.models.policy_file.load_policy``)."""


class SweepError(UserError):
    """A sweep cannot start as asked (strict pre-flight, settings a cluster cannot honour,
    launcher options out of range); nothing was run (exit 2)."""


class SearchSpaceError(UserError):
    """A search space Tune cannot search as written (exit 2, before Ray starts)."""


class CellFailed(RuntimeError):
    """A sweep cell's job failed; its folder's summary.json holds the error and traceback."""


class TrialRefused(RuntimeError):
    """A search's searcher proposed a trial the pre-flight refuses (status skipped or invalid)."""


class ResultsWriteError(ReportedError, OSError):
    """A result file could not be written (a full disk, a lost mount): exit 1 with one line
    naming the file and what is already in it; the rows written before are kept."""


class SweepIncomplete(ReportedError):
    """A sweep ran to its end but some cells failed (exit 1) or were invalid (exit 2).

    Raised once, after the final table, instead of the first failed cell's
    traceback (which each cell's ``summary.json`` keeps).
    """

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# The report's errors (rlperf.report): it reads result files and raises these; rlperf-report
# maps NoRunsFoundError, MixedFingerprintsError, BaselineError and GateError to exit 2.


class NoRunsFoundError(RuntimeError):
    """A path handed to the report holds no cell of any recognised kind."""


class CellError(RuntimeError):
    """A cell's files are missing, corrupt or inconsistent (the report skips the cell)."""


class MixedFingerprintsError(RuntimeError):
    """``--strict`` and cells of one comparison come from different machines or software."""


class BaselineError(ValueError):
    """``--baseline`` matches no cell, or several cells of one model."""


class ObjectiveError(ValueError):
    """``rlperf-report --objective``: an objective that does not fit a comparison (time per
    iteration over iterations that hold different work, time to target without a target)."""


class GateError(ValueError):
    """A gate that cannot be run: a bad tolerance, or nothing to compare."""


class FigureNotApplicable(Exception):
    """The data holds nothing this report figure could show (the reason is the message)."""


class InfeasibleError(UserError, RuntimeError):
    """The experiment asks for resources this machine (or Ray) does not have (exit 2)."""


class TrialStopped(SystemExit):
    """Ray Tune stopped this run's trial (a search's scheduler): status ``stopped_early``.

    Raised where Tune's ``report`` ends a stopped trial's thread (with SystemExit, as
    Tune does), so the job wrapper records the outcome before the thread ends; the
    launcher then writes the scheduler's own reason into ``summary.json``.
    """


class SkipCell(UserError):
    """Raised by a stage that cannot run here (missing hardware or runtime): status ``skipped``.

    In a sweep the cell is recorded as skipped and the sweep goes on; a single
    run ends with exit status 2 (docs/exit-codes.md).
    """


class RunFault(ReportedError):
    """``train.on_fault=fail`` and an iteration was touched by a fault (exit 1)."""


class NvmlUnavailableError(RuntimeError):
    """Raised by :meth:`NvmlSession.open` when NVML cannot be used on this machine."""


class ServeError(RuntimeError):
    """A serve-stage failure with a message that says what to do."""


class PayloadError(ValueError):
    """A request body that is not one observation of the expected shape and dtype."""


class TfliteError(RuntimeError):
    """A failure to build or run a TFLite policy, with a message that says what to do."""


class TfliteInputError(TfliteError, UserError):
    """A model file or policy the stage cannot use as given (exit 2, docs/exit-codes.md)."""


class ExportVerificationError(TfliteError):
    """The exported model does not reproduce the torch policy within the tolerance."""


class EdgeTpuModelOnCpuError(TfliteInputError):
    """An Edge-TPU-compiled ``.tflite`` was given to a CPU backend."""


class EdgeTpuUnavailable(SkipCell):
    """No usable Edge TPU here (runtime, device or compiler missing); the message says which."""


def exit_code_of(exc: BaseException) -> int:
    """The exit status of a command that ended with ``exc`` (see the module docstring)."""
    if isinstance(exc, KeyboardInterrupt):
        return 128 + (_stop_signal or signal.SIGINT)
    if isinstance(exc, SystemExit):
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else ExitCode.failed)
    if isinstance(exc, ReportedError):
        return int(exc.exit_code)
    return ExitCode.failed


def run_command(
    command: Callable[[], object],
    prog: str = "rlperf",
    is_user_error: Callable[[BaseException], bool] = lambda exc: False,
) -> int:
    """Run ``command``; report what ended it on stderr and return the exit status.

    ``is_user_error``: exceptions of other libraries that are user errors too
    (e.g. Hydra's composition errors before any job started).
    """
    with stop_handlers():
        try:
            command()
        except BaseException as exc:
            code = ExitCode.user_error if is_user_error(exc) else exit_code_of(exc)
            report_exit(exc, code, prog)
            return code
    return ExitCode.completed


#: The signals that stop a command as Ctrl-C does, and their names in reasons.
STOP_SIGNALS: dict[int, str] = {
    signal.SIGINT: "Ctrl-C",
    signal.SIGTERM: "SIGTERM",
    signal.SIGHUP: "SIGHUP",
}

_stop_signal: int | None = None  # the first stop signal of this command, once one came
_handlers_installed = False


def _on_stop_signal(signum: int, frame: Any) -> None:
    """The first stop signal: remembered, then KeyboardInterrupt (see :func:`interrupt_reason`).

    SIGTERM and SIGHUP raise it as Ctrl-C does, also while Ray Tune runs a sweep's group
    (Tune's own SIGINT handler waits for its trials, which hangs when a scheduler signalled
    every process of the job and Ray's processes died with it). A second stop signal, while
    the first one's cleanup runs, exits at once with 128 + its number.
    """
    global _stop_signal
    if _stop_signal is not None:
        os.write(2, f"rlperf: {STOP_SIGNALS[signum]} again: exiting now\n".encode())
        os._exit(128 + signum)
    _stop_signal = signum
    raise KeyboardInterrupt


@contextmanager
def stop_handlers() -> Iterator[None]:
    """:func:`_on_stop_signal` for :data:`STOP_SIGNALS` while a command runs; the previous
    handlers after. Every command of rlperf's runs in it (:func:`run_command`, rlperf-report).

    An interrupt raised while the main thread ran a finalizer (``__del__``, a weakref
    callback) is swallowed by Python; the signal is remembered, and
    :func:`raise_if_interrupted` at the next step raises it again. Nothing is installed
    off the main thread.
    """
    global _stop_signal, _handlers_installed
    _stop_signal = None
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _on_stop_signal) for signum in STOP_SIGNALS}
    _handlers_installed = True
    try:
        yield
    finally:
        _handlers_installed = False
        _stop_signal = None  # a stop signal belongs to its command
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def keep_stop_handlers() -> None:
    """Install the stop handlers again after a library replaced them (``ray.init`` sets a
    SIGTERM handler that exits with ``SystemExit(15)``, and its C++ core one that prints a
    stack dump and aborts). Only where :func:`run_command` installed them, on the main thread."""
    if _handlers_installed and threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, _on_stop_signal)


def raise_if_interrupted() -> None:
    """Raise KeyboardInterrupt when a stop signal came during this command (a step's end)."""
    if _stop_signal is not None:
        raise KeyboardInterrupt


def stop_signal() -> int | None:
    """The stop signal that came during this command (its number), None while none came."""
    return _stop_signal


def interrupt_reason() -> str:
    """What stopped the command, for summaries and tables: ``interrupted (Ctrl-C)``,
    ``interrupted (SIGTERM)`` or ``interrupted (SIGHUP)``."""
    return f"interrupted ({STOP_SIGNALS.get(_stop_signal or signal.SIGINT, 'Ctrl-C')})"


def report_exit(exc: BaseException, code: int, prog: str = "rlperf") -> None:
    """What a person reads when a command ends with ``exc``: one line, or a traceback."""
    if isinstance(exc, SystemExit):
        return
    if isinstance(exc, KeyboardInterrupt):
        message = f"{interrupt_reason()}; completed rows and cells are kept"
    elif isinstance(exc, ReportedError) or code == ExitCode.user_error:
        message = message_of(exc)
    else:
        traceback.print_exception(exc, file=sys.stderr)
        message = f"failed: {error_line(exc)}"
    print(f"{prog}: {message}", file=sys.stderr, flush=True)


def error_line(exc: BaseException) -> str:
    """``Type: message`` of ``exc``; a message-less wrapper names the cause that has one.

    RLlib re-raises an env's error as a bare ``RuntimeError from e``: the line then reads
    ``RuntimeError (from ValueError: what the env said)``.
    """
    if str(exc).strip():
        return f"{type(exc).__name__}: {exc}"
    inner = exc.__cause__ or exc.__context__
    seen = {id(exc)}
    while inner is not None and id(inner) not in seen:
        if str(inner).strip():
            return f"{type(exc).__name__} (from {type(inner).__name__}: {inner})"
        seen.add(id(inner))
        inner = inner.__cause__ or inner.__context__
    return type(exc).__name__


def message_of(exc: BaseException) -> str:
    """``exc``'s message with its cause's first line (Hydra wraps what the user got wrong)."""
    text = str(exc).split("\nConfig search path:")[0].strip() or type(exc).__name__
    # OmegaConf appends indented details (full_key, reference_type, ...): one line.
    text = " ".join(line for line in text.splitlines() if line and not line[0].isspace())
    options = getattr(exc, "options", None)  # Hydra's group option not found: list them
    if options:
        text = re.sub(r"\s*Available options in '[^']*':\s*$", "", text)
        text += f"; choose one of {', '.join(map(str, options))}"
    cause = exc.__cause__
    if cause is not None and not isinstance(exc, ReportedError):
        first = str(cause).strip().splitlines()[0] if str(cause).strip() else ""
        if first and first not in text:
            text += f": {first}"
        text += _valid_keys_hint(cause)
    # Hydra raises its composition error while handling OmegaConf's (a context).
    return text + "".join(hint(cause or exc.__context__ or exc) for hint in _MESSAGE_HINTS)


#: Functions a layer above adds (:func:`add_message_hint`) that explain a user error's cause
#: (the error itself where it has none) in its terms; each returns "" when it has nothing
#: to say.
_MESSAGE_HINTS: list[Callable[[BaseException | None], str]] = []


def add_message_hint(hint: Callable[[BaseException | None], str]) -> None:
    """Append ``hint(cause)`` to the one line of every user error. The config layer adds
    the kind-schema hint (:func:`rlperf.config.schema.kind_schema_hint`): this module
    imports none of rlperf, so what the schema holds is passed in."""
    if hint not in _MESSAGE_HINTS:
        _MESSAGE_HINTS.append(hint)


def _valid_keys_hint(cause: BaseException) -> str:
    """``"; valid keys of train.stop: ..."`` for an unknown key in a structured config
    (OmegaConf's error names the key and its schema class, not the keys it has)."""
    parent, full_key = getattr(cause, "parent_node", None), getattr(cause, "full_key", None)
    keys = getattr(parent, "keys", None)
    if type(cause).__name__ not in ("ConfigAttributeError", "ConfigKeyError") or not callable(keys):
        return ""
    where = str(full_key).rpartition(".")[0] if full_key else ""
    return f"; valid keys{f' of {where}' if where else ''}: {', '.join(map(str, keys()))}"
