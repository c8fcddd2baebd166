"""Deprecated Ray / RLlib APIs reached from rlperf's own calls.

RLlib reports deprecations through its logger (``ray._common.deprecation``),
not Python's ``warnings``, so ``filterwarnings`` cannot see them. While a job
runs (:func:`watching`), a handler on that logger looks at the call stack of
every deprecation: when the deprecated API was called by rlperf's code (not by
RLlib's own internals, e.g. RLlib's ``RLModule.__init__`` building the
deprecated ``RLModuleConfig`` for every module), rlperf logs a warning naming
the API and rlperf's call site, so it is fixed before the API is removed. The
test suite fails on such a warning (tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

#: The logger RLlib's and Ray's ``deprecation_warning`` / ``@Deprecated`` write to.
RAY_DEPRECATION_LOGGER = "ray._common.deprecation"
#: Message of rlperf's warning (tests look for it).
OWN_DEPRECATION = "deprecated API reached from rlperf's own code"

_ROOTS = ("rlperf", "hydra_plugins")
log = logging.getLogger("rlperf.deprecations")


def _package_of(frame: FrameType) -> str:
    """``rlperf``, ``hydra_plugins``, ``ray``, ``<glue>`` (generated code) or ``other``."""
    name = str(frame.f_globals.get("__name__", ""))
    top = name.split(".")[0]
    if top in _ROOTS or top == "ray":
        return top
    if frame.f_code.co_filename.startswith("<") or top in ("functools", "dataclasses"):
        return "<glue>"
    return "other"


def own_call_site(frame: FrameType | None) -> str | None:
    """``file:line`` of rlperf's call of a deprecated API, walking out from ``frame``.

    ``frame``: anywhere inside the deprecation report (the logging call). The
    deprecated API is the frame that called ``deprecation_warning``, or, when
    that is a wrapper of ``@Deprecated``, the decorated function or class. The
    API was reached from rlperf's own call when the frame calling the API
    (generated glue such as a dataclass ``__init__`` skipped) is rlperf's;
    an API that RLlib calls from its own code is RLlib's to replace.
    """
    while frame is not None and frame.f_globals.get("__name__") != RAY_DEPRECATION_LOGGER:
        frame = frame.f_back
    # The report itself, then the decorator's wrapper (if any): what is above is the API's
    # caller (decorated) or the API's body (a direct deprecation_warning call).
    while frame is not None and frame.f_code.co_name == "deprecation_warning":
        frame = frame.f_back
    if frame is not None:
        frame = frame.f_back  # from the API's body, or from the wrapper, to the API's caller
    while frame is not None and _package_of(frame) == "<glue>":
        frame = frame.f_back
    if frame is not None and _package_of(frame) in _ROOTS:
        return f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}"
    return None


class OwnDeprecationHandler(logging.Handler):
    """Collects the deprecations reached from rlperf's calls: ``(message, call site)``."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.found: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        site = own_call_site(sys._getframe())
        if site is not None:
            self.found.append((record.getMessage(), site))
            log.warning("%s: %s (called at %s)", OWN_DEPRECATION, record.getMessage(), site)


@contextlib.contextmanager
def watching() -> Iterator[OwnDeprecationHandler]:
    """Report deprecations reached from rlperf's calls while the block runs."""
    logger = logging.getLogger(RAY_DEPRECATION_LOGGER)
    handler = OwnDeprecationHandler()
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
