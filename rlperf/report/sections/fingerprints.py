"""Section *Fingerprints*: every fingerprint group (machine, cells, its comparable fields),
collapsed."""

from __future__ import annotations

import pandas as pd

from rlperf.report.export import render
from rlperf.report.sections.base import Inputs, Section


def fingerprints_section(inputs: Inputs) -> list[render.Block]:
    """One row per fingerprint group."""
    groups = inputs.result.fingerprint_groups
    table = pd.DataFrame(
        {
            "fingerprint": [g.name for g in groups.values()],
            "machine": [g.machine for g in groups.values()],
            "cells": [len(g.cells) for g in groups.values()],
            "fields": [
                ", ".join(f"{k}={v}" for k, v in list(g.fingerprint.items())[:12])
                for g in groups.values()
            ],
        }
    )
    return [render.Heading("Fingerprints", 2),
            render.Collapsed(f"{len(table)} fingerprint(s): every comparable field",
                             [render.Table(table)])]  # fmt: skip


SECTION = Section(
    name="fingerprints",
    title="Fingerprints",
    order=130,
    needs=("fingerprint_groups",),
    render=fingerprints_section,
)
