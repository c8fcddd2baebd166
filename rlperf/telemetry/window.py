"""``with reader:`` for the telemetry readers that have a ``start()`` and a ``stop()``."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self


class StartStop:
    """``with x:`` starts ``x`` and stops it on the way out, whatever ended the block
    (the CPU window of :mod:`rlperf.telemetry.cpu`, the sampler of
    :mod:`rlperf.telemetry.sampler`, the NVML session of :mod:`rlperf.telemetry.nvml`)."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> Any:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
