"""A pytest plugin (loaded by tests/conftest.py) that makes pytest-xdist's ``--dist
loadgroup`` keep together what must run in one worker.

- A test that uses a module- or session-scoped fixture defined in its own module (an
  MLflow server, a served policy, a module's report) gets its module as its
  ``xdist_group``, so that one worker builds the fixture once.
- pytest-xdist 3.8 groups by a suffix it adds to each grouped test's id
  (``<id>@<group>``) by setting ``item._nodeid``, which pytest 9.2 no longer reads (an
  item's id is its structured ``NodeId``): every test would be spread alone. The suffix is
  set here on the id pytest reads, as pytest-xdist means it.
- The ``@pytest.mark.alone`` tests go last: one waits for the other worker's current
  test to end and holds its next one back (``support.shared.machine_share``), which costs
  least when the tests left are short, at the end.
"""

from __future__ import annotations

import dataclasses

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not getattr(config.option, "loadgroup", False):  # set in the workers of loadgroup
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None and builds_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
        group = group_of(item)
        if group is not None and not item.nodeid.endswith(f"@{group}"):
            _suffix_id(item, group)
    items.sort(key=lambda item: item.get_closest_marker("alone") is not None)  # stable


def builds_a_module_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses a fixture of module or session scope defined in its module."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        d.scope != "function" and d.baseid.endswith(".py")
        for name in item.fixturenames
        for d in info.name2fixturedefs.get(name, ())
    )


def group_of(item: pytest.Item) -> str | None:
    """The group pytest-xdist reads from ``item``'s ``xdist_group`` marks (its rule: the
    names, sorted, joined by ``_``); None when it has none."""
    names = {
        str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        for mark in item.iter_markers("xdist_group")
    }
    return "_".join(sorted(names)) if names else None


def _suffix_id(item: pytest.Item, group: str) -> None:
    node_id = getattr(item, "_id", None)
    if node_id is None or not dataclasses.is_dataclass(node_id):
        return  # pytest before 9.2: pytest-xdist's own item._nodeid did it
    suffixed = dataclasses.replace(node_id)
    object.__setattr__(suffixed, "_str_cache", f"{item.nodeid}@{group}")
    item._id = suffixed  # type: ignore[attr-defined]
