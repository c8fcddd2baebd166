"""The text of the report: the blocks that :mod:`rlperf.report.export.render` writes as
``report.md`` and ``report.html``, assembled in one loop over the section registry
(:mod:`rlperf.report.sections.base`).

Sections, in reading order (each one module of :mod:`rlperf.report.sections`, its
``order`` in brackets): the title and what was read (10) → the answers to the users'
questions (20) → warnings and findings, with the gate's verdict (30) → time to target
(40) → across workloads and across machines (50) → scaling (60) → returns (70) →
searches (80) → one section per comparison family with a table per comparison set (90)
→ serving (100) → methods (110) → figures (120) → fingerprints (130) → cells (140).
"""

from __future__ import annotations

from rlperf.report.export.render import Block
from rlperf.report.sections.base import Inputs, registered


def document(inputs: Inputs) -> list[Block]:
    """Every block of the report, in reading order."""
    return [block for section in registered() for block in section.render(inputs)]
