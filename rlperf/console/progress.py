"""Progress of one run: a live bar on an interactive terminal, one line per step otherwise."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlperf.console import Console


def format_duration(seconds: float | None) -> str:
    """``75.2`` -> ``'1m15s'``; None -> ``'?'``."""
    if seconds is None or seconds != seconds:
        return "?"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


class RunProgress:
    """``done``/``total`` steps of a run with what the last step measured, elapsed and ETA.

    ``started``: the run's start (``time.monotonic()``; default now): elapsed
    time counts from there. The ETA is the time since the display opened times
    what is left over what is done: steps, or the ``fraction`` of the run that
    :meth:`update` was given (when ``total`` is only a cap). Use as a context
    manager; :meth:`update` after every step with a short text.
    """

    def __init__(
        self,
        console: Console,
        label: str,
        total: int,
        unit: str = "iteration",
        started: float | None = None,
    ) -> None:
        self.console, self.label, self.total, self.unit = console, label, max(total, 0), unit
        self.opened = time.monotonic()
        self.started = self.opened if started is None else started
        self.done = 0
        self.fraction: float | None = None
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> RunProgress:
        if self.console.interactive and not self.console.quiet:
            self._start_bar()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def progress_fraction(self) -> float:
        if self.fraction is not None:
            return self.fraction
        return self.done / self.total if self.total else 0.0

    def eta_s(self) -> float | None:
        f = self.progress_fraction()
        if not self.done or f <= 0:
            return None
        return (time.monotonic() - self.opened) * max(1.0 - f, 0.0) / f

    def update(self, done: int, info: str, brief: str = "", fraction: float | None = None) -> None:
        """Step ``done`` (1-based) finished; ``info`` says what it measured (a bar: ``brief``);
        ``fraction``: how much of the run is done, where ``total`` is only a cap."""
        self.done, self.fraction = done, fraction
        if self._bar is not None:
            if fraction is None:
                self._bar.update(self._task, completed=done, info=brief or info)
            else:  # the bar (and rich's ETA) follows the budget used, in percent
                self._bar.update(
                    self._task,
                    total=100,
                    completed=round(fraction * 100, 1),
                    info=f"% of the budget | {self.unit} {done} | {brief or info}",
                )
            return
        self.console.say(
            f"[{self.label} {format_duration(self.elapsed_s()):>6}] {self.unit} "
            f"{done}/{self.total}: {info} | ETA {format_duration(self.eta_s())}",
            progress=True,
        )

    def _start_bar(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[info]}"),
            console=self.console.rich(),
            redirect_stdout=False,
            redirect_stderr=False,
            transient=False,
        )
        self._task = self._bar.add_task(self.label, total=self.total, info="")
        self._bar.start()
