"""report.html without a browser: each figure file embedded once, later mentions a link up
to it; every table in its own scroll box (render.to_html)."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pandas as pd

from rlperf.report.export import render


def _png(path: Path, payload: bytes) -> Path:
    """A file with a PNG's signature: to_html embeds the bytes as they are."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + payload)
    return path


def test_a_figure_shown_twice_is_embedded_once(tmp_path: Path) -> None:
    intervals = _png(tmp_path / "figures" / "intervals.png", b"intervals" * 50)
    latency = _png(tmp_path / "figures" / "latency.png", b"latency" * 50)
    blocks: list[render.Block] = [
        render.Heading("Answers"),
        render.Image(intervals, "Objective per configuration"),
        render.Collapsed("more", [render.Image(latency, "Latency")]),
        render.Heading("Figures"),
        # The same file by another spelling of its path is the same figure.
        render.Image(tmp_path / "figures" / ".." / "figures" / "intervals.png", "Again"),
        render.Image(latency, "Latency"),
    ]
    page = render.to_html(blocks, "t")
    for png in (intervals, latency):
        assert page.count(base64.b64encode(png.read_bytes()).decode("ascii")) == 1
    assert page.count("<figure") == 2
    assert re.findall(r"<figure id='([^']+)'", page) == ["fig-intervals", "fig-latency"]
    assert re.findall(r"Figure: <a href='#([^']+)'>([^<]+)</a> \(shown above\)", page) == [
        ("fig-intervals", "Again"),
        ("fig-latency", "Latency"),
    ]
    # The first copy comes first: every link points up.
    assert page.index("id='fig-intervals'") < page.index("href='#fig-intervals'")
    # Markdown links files (cheap): both mentions keep their image.
    assert render.to_markdown(blocks, tmp_path).count("](figures/intervals.png)") == 2


def test_figure_ids_are_unique_and_plain(tmp_path: Path) -> None:
    a = _png(tmp_path / "a" / "returns 1.png", b"a")
    b = _png(tmp_path / "b" / "returns 1.png", b"b")
    page = render.to_html([render.Image(a, "A"), render.Image(b, "B")], "t")
    assert re.findall(r"<figure id='([^']+)'", page) == ["fig-returns-1", "fig-returns-1-2"]


def test_each_table_scrolls_in_its_own_box() -> None:
    wide = pd.DataFrame([[f"{i}.0 [{i}, {i + 1}]" for i in range(30)]],
                        columns=[f"env steps/s [95% CI] {i}" for i in range(30)])  # fmt: skip
    blocks: list[render.Block] = [
        render.Table(wide, "wide"),
        render.Collapsed("more", [render.Table(wide.iloc[:, :2])]),
    ]
    page = render.to_html(blocks, "t")
    assert page.count("<div class='scroll'><table>") == page.count("<table") == 2
    assert page.count("</table></div>") == 2
    assert "<p class='caption'>wide</p><div class='scroll'>" in page.replace("\n", "")
