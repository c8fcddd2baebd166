"""A pytest plugin that keeps every test's time (setup, call, teardown), its fixtures, its
markers and its outcome in pytest's cache (``.pytest_cache``, key ``rlperf/durations``), so
that ``scripts/durations.py`` (``nox -s durations``) can say where the suite's time goes
after any full run, CI's included. Recording costs a dict entry per test phase; nothing is
written when the cache plugin is off (``-p no:cacheprovider``)."""

from __future__ import annotations

from typing import Any

import pytest

#: The cache key of the last run's record.
CACHE_KEY = "rlperf/durations"

_times: dict[str, dict[str, Any]] = {}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        _times[item.nodeid] = {
            "fixtures": sorted(getattr(item, "fixturenames", ())),
            "markers": sorted({m.name for m in item.iter_markers()}),
            "setup": 0.0,
            "call": 0.0,
            "teardown": 0.0,
            "outcome": "not run",
        }


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    entry = _times.get(report.nodeid)
    if entry is None:
        return
    entry[report.when] = float(report.duration)
    if report.when == "call" or report.outcome != "passed":
        entry["outcome"] = report.outcome


def pytest_sessionfinish(session: pytest.Session) -> None:
    cache = getattr(session.config, "cache", None)
    ran = {k: v for k, v in _times.items() if v["outcome"] != "not run"}
    if cache is not None and ran:
        cache.set(CACHE_KEY, ran)
