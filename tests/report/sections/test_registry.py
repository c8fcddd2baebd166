"""The section registry (rlperf.report.sections.base): every section module declares one
``SECTION``; names and orders are unique; what a section says it needs exists; the
document is the registry's blocks in order."""

from __future__ import annotations

import dataclasses
import pkgutil

import pytest

import rlperf.report.sections as sections_pkg
from rlperf.report.result import ReportResult
from rlperf.report.sections.base import Inputs, Section, registered

#: The reading order of docs/report.md#the-report.
ORDER = ["title", "answers", "findings", "targets", "across", "scaling", "returns", "search",
         "families", "serve", "methods", "figures", "fingerprints", "cells"]  # fmt: skip


def test_every_section_module_registers_one_section_in_reading_order() -> None:
    modules = {m.name for m in pkgutil.iter_modules(sections_pkg.__path__)}
    found = registered()
    # A new section may stand anywhere; these keep their reading order.
    assert [s.name for s in found if s.name in ORDER] == ORDER
    assert len({s.order for s in found}) == len(found)
    # Every module but the registry's own is a section.
    assert modules - {s.name for s in found} == {"base"}


def test_what_a_section_needs_is_there() -> None:
    names = {s.name for s in registered()}
    shared = {f.name for f in dataclasses.fields(ReportResult)}
    given = {f.name for f in dataclasses.fields(Inputs)} | {"plans"}
    for section in registered():
        assert isinstance(section, Section) and section.title
        unknown = set(section.needs) - shared - given - names
        assert not unknown, (section.name, unknown)


def test_the_document_is_the_registry_in_one_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A section added to the registry is rendered at its order, with nothing else to edit."""
    import rlperf.report.document as doc
    from rlperf.report.document import document
    from rlperf.report.export.render import Para

    seen: list[str] = []

    def fake(name: str) -> Section:
        def render(inputs: Inputs) -> list:
            seen.append(name)
            return [Para(name)]

        return Section(name=name, title=name, order=0, needs=(), render=render)

    monkeypatch.setattr(doc, "registered", lambda: [fake("b"), fake("a")])
    blocks = document(None)  # type: ignore[arg-type]
    assert seen == ["b", "a"] and [b.text for b in blocks] == ["b", "a"]
