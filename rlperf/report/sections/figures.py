"""Section *Figures*: every drawn figure of the registry (:mod:`rlperf.report.figures.registry`)
with its caption, the serve figure, and those not drawn with the reason."""

from __future__ import annotations

from rlperf.report.export import render
from rlperf.report.figures.registry import FIGURES
from rlperf.report.figures.serve import CAPTION as SERVE_CAPTION
from rlperf.report.figures.serve import FIGURE as SERVE_FIGURE
from rlperf.report.sections.base import Inputs, Section


def figures_section(inputs: Inputs) -> list[render.Block]:
    """The figures in the registry's order, then the serve figure; the undrawn listed."""
    res = inputs.result
    blocks: list[render.Block] = [render.Heading("Figures", 2)]
    for name, (_, caption) in FIGURES.items():
        if name in res.figures:
            blocks.append(render.Image(res.figures[name], caption))
    if SERVE_FIGURE in res.figures:
        blocks.append(render.Image(res.figures[SERVE_FIGURE], SERVE_CAPTION))
    if not res.figures and not res.figures_skipped:
        blocks.append(render.Para("Figures were not drawn (`--no-figures`)."))
    if res.figures_skipped:
        why = "; ".join(f"{n} ({why})" for n, why in res.figures_skipped.items())
        blocks.append(render.Para(f"Not drawn: {why}."))
    return blocks


SECTION = Section(
    name="figures",
    title="Figures",
    order=120,
    needs=("figures", "figures_skipped"),
    render=figures_section,
)
