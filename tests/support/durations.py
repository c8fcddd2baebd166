"""A pytest plugin that keeps every test's time (setup, call, teardown), its fixtures, its
markers, its outcome and (under pytest-xdist) its worker in pytest's cache
(``.pytest_cache``, key ``rlperf/durations``), so that ``scripts/durations.py`` (``nox -s
durations``) can say where the suite's time goes after any full run, CI's included.

Under pytest-xdist the workers run the tests and the controller writes the record: each
item carries its fixtures and markers in ``user_properties``, which travel with its
reports. Recording costs a dict entry per test phase; nothing is written when the cache
plugin is off (``-p no:cacheprovider``)."""

from __future__ import annotations

import time
from typing import Any

import pytest

#: The cache key of the last run's record; :data:`RUN_KEY`: its wall time and workers.
CACHE_KEY = "rlperf/durations"
RUN_KEY = "rlperf/durations-run"
#: The ``user_properties`` entry an item's fixtures and markers travel in.
PROPERTY = "rlperf_durations"

_times: dict[str, dict[str, Any]] = {}
_started = time.monotonic()


def pytest_sessionstart(session: pytest.Session) -> None:
    global _started
    _started = time.monotonic()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        about: dict[str, Any] = {
            "fixtures": sorted(getattr(item, "fixturenames", ())),
            "markers": sorted({m.name for m in item.iter_markers()}),
        }
        item.user_properties.append((PROPERTY, about))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    about = next((v for k, v in report.user_properties if k == PROPERTY), None)
    if about is None:
        return
    # pytest-xdist's --dist loadgroup adds "@<group>" to the id of a grouped test (its rule:
    # an "@" after the parameters' "]").
    node = report.nodeid
    if node.rfind("@") > node.rfind("]"):
        node = node[: node.rfind("@")]
    entry = _times.setdefault(
        node,
        {**about, "setup": 0.0, "call": 0.0, "teardown": 0.0, "outcome": "not run"},
    )
    entry[report.when] = float(report.duration)
    if report.when == "call" or report.outcome != "passed":
        entry["outcome"] = report.outcome
    worker = getattr(report, "node", None)
    if worker is not None:
        entry["worker"] = str(getattr(worker, "gateway", worker).id)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the controller records
    cache = getattr(session.config, "cache", None)
    ran = {k: v for k, v in _times.items() if v["outcome"] != "not run"}
    if cache is not None and ran:
        cache.set(CACHE_KEY, ran)
        workers = getattr(session.config.option, "numprocesses", None) or 0
        cache.set(RUN_KEY, {"wall_s": time.monotonic() - _started, "workers": workers})
