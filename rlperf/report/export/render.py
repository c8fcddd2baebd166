"""Render a report document to ``report.md`` and a self-contained ``report.html``.

The document is a list of blocks built by :mod:`rlperf.report.document`; both
renderers walk the same list, so the two files always say the same thing. The
HTML embeds every PNG as base64, once, and needs nothing else (no CSS or JS files); at
1280 and at 800 px nothing in it is cut off (wide tables scroll in their own box).
"""

from __future__ import annotations

import base64
import html
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


@dataclass
class Heading:
    """A section heading (level 1-4)."""

    text: str
    level: int = 2


@dataclass
class Para:
    """A paragraph; `code` and **bold** are rendered in both formats."""

    text: str


@dataclass
class Bullets:
    """A bulleted list."""

    items: list[str]


@dataclass
class Warn:
    """A highlighted warning."""

    text: str


@dataclass
class Table:
    """A table of already formatted strings."""

    df: pd.DataFrame
    caption: str = ""


@dataclass
class Image:
    """A PNG figure with a caption (the SVG sits next to it)."""

    path: Path
    caption: str


@dataclass
class Collapsed:
    """Blocks a reader opens on demand (``<details>`` in both formats: GitHub and browsers
    render it), with a one-line ``summary`` of what is inside."""

    summary: str
    blocks: list[Block]


@dataclass
class Points:
    """Bullets a person scans: each a headline with, where it has one, its whole text under
    it (``<details>`` in HTML; an indented line in Markdown, where scripts read it). A whole
    text that opens with its headline shows only the rest there: the line is not read
    twice."""

    items: list[tuple[str, str]]


def _more(head: str, whole: str) -> str:
    """What a point's whole text adds to its headline ("" where nothing)."""
    if whole == head:
        return ""
    return whole[len(head) :].strip() if whole.startswith(head) else whole


Block = Heading | Para | Bullets | Warn | Table | Image | Collapsed | Points


def _text(value: object) -> str:
    return "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def _md_cell(value: object) -> str:
    return _text(value).replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: list[Block], out_dir: Path) -> str:
    """Markdown with figures linked relative to ``out_dir``."""
    lines: list[str] = []
    for b in blocks:
        if isinstance(b, Collapsed):
            lines += [f"<details><summary>{html.escape(b.summary)}</summary>", "",
                      to_markdown(b.blocks, out_dir), "</details>", ""]  # fmt: skip
        elif isinstance(b, Heading):
            lines += ["#" * b.level + " " + b.text, ""]
        elif isinstance(b, Para):
            lines += [b.text, ""]
        elif isinstance(b, Bullets):
            lines += [f"- {item}" for item in b.items] + [""]
        elif isinstance(b, Points):
            for head, whole in b.items:
                more = _more(head, whole)
                lines += [f"- {head}"] + ([f"  - {more}"] if more else [])
            lines.append("")
        elif isinstance(b, Warn):
            lines += [f"> **Warning:** {b.text}", ""]
        elif isinstance(b, Table):
            if b.caption:
                lines += [f"*{b.caption}*", ""]
            cols = [str(c) for c in b.df.columns]
            lines.append("| " + " | ".join(_md_cell(c) for c in cols) + " |")
            lines.append("|" + "|".join("---" for _ in cols) + "|")
            for row in b.df.itertuples(index=False):
                lines.append("| " + " | ".join(_md_cell(v) for v in row) + " |")
            lines.append("")
        elif isinstance(b, Image):
            rel = Path(os.path.relpath(b.path, out_dir)).as_posix()
            svg = Path(rel).with_suffix(".svg").as_posix()
            lines += [f"![{b.caption}]({rel})", "", f"*{b.caption}* ([SVG]({svg}))", ""]
    return "\n".join(lines)


def _inline(text: str) -> str:
    out = html.escape(text, quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)


#: Nothing may be cut off at any width (tests/report/export/test_report_html.py checks
#: 1280 and 800 px): each table scrolls in its own box, whose scrollbar is styled so that
#: Chromium and Safari keep it drawn (where the system's is an overlay that shows only
#: while scrolling), and a shadow at an edge that hides columns (the white covers scroll
#: with the table and hide the shadow at its ends; cell backgrounds are translucent to let
#: it through). Header cells wrap, data cells do not; long words and `code` in text break
#: anywhere.
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1200px;
margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1,h2,h3,h4,p,li,summary,figcaption,.warn{overflow-wrap:anywhere}
.scroll{overflow-x:auto;margin:0.5em 0 1.5em;background:
linear-gradient(to right,#fff 30%,#fff0) left/40px 100% no-repeat local,
linear-gradient(to left,#fff 30%,#fff0) right/40px 100% no-repeat local,
radial-gradient(farthest-side at 0 50%,#0003,#0000) left/12px 100% no-repeat scroll,
radial-gradient(farthest-side at 100% 50%,#0003,#0000) right/12px 100% no-repeat scroll}
.scroll::-webkit-scrollbar{height:8px}
.scroll::-webkit-scrollbar-thumb{background:#bbb;border-radius:4px}
table{border-collapse:collapse;font-size:12px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left}
th{background:#0000000d;vertical-align:bottom}
td{white-space:nowrap}tr:nth-child(even) td{background:#00000005}
code{background:#f4f4f4;padding:0 3px;border-radius:3px;font-size:90%}
.warn{background:#fff4e5;border-left:4px solid #e08a00;padding:0.5em 1em;margin:1em 0}
figure{margin:1em 0 2em}figure img{max-width:100%;height:auto;box-sizing:border-box;
border:1px solid #eee}
figcaption{font-style:italic;font-size:13px;color:#555}
.caption{font-style:italic;color:#555;font-size:13px;overflow-wrap:anywhere}
details{margin:0.5em 0 1em}summary{cursor:pointer;color:#0366d6}
details.more{margin:0.1em 0 0.4em;font-size:13px;color:#444}details.more summary{font-size:12px}
"""


def to_html(blocks: list[Block], title: str) -> str:
    """A single self-contained HTML page (figures embedded as base64 PNG, each file once:
    a figure shown again, as the Figures section repeats the Answers', is a link up to
    the first copy)."""
    parts = [
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        *_html_blocks(blocks, {}),
        "</body></html>",
    ]
    return "\n".join(parts)


def _figure_id(path: Path, taken: set[str]) -> str:
    """``fig-<stem>`` (characters an id or a URL fragment would need escaped dropped),
    numbered where two figure files share a stem."""
    base = "fig-" + re.sub(r"[^A-Za-z0-9_-]+", "-", path.stem)
    found, n = base, 1
    while found in taken:
        n += 1
        found = f"{base}-{n}"
    return found


def _html_figure(image: Image, shown: dict[Path, str]) -> str:
    """The figure embedded where its file first appears; later, a link to it (``shown``
    maps each file embedded so far to its element id). A 40-60 kB PNG is ~75 kB of
    base64: a report that shows a figure twice would carry it twice."""
    key = image.path.resolve()
    if key in shown:
        link = f"<a href='#{shown[key]}'>{_inline(image.caption or image.path.stem)}</a>"
        return f"<p class='caption'>Figure: {link} (shown above)</p>"
    shown[key] = _figure_id(image.path, set(shown.values()))
    data = base64.b64encode(image.path.read_bytes()).decode("ascii")
    return (
        f"<figure id='{shown[key]}'><img alt='{html.escape(image.caption)}' "
        f"src='data:image/png;base64,{data}'>"
        f"<figcaption>{_inline(image.caption)}</figcaption></figure>"
    )


def _html_table(table: Table) -> list[str]:
    parts = [f"<p class='caption'>{_inline(table.caption)}</p>"] if table.caption else []
    head = "".join(f"<th>{_inline(str(c))}</th>" for c in table.df.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_inline(_text(v))}</td>" for v in row) + "</tr>"
        for row in table.df.itertuples(index=False)
    )
    parts.append(
        f"<div class='scroll'><table><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table></div>"
    )
    return parts


def _html_point(head: str, whole: str) -> str:
    more = _more(head, whole)
    if not more:
        return f"<li>{_inline(head)}</li>"
    return (f"<li>{_inline(head)}<details class='more'><summary>more</summary>"
            f"{_inline(more)}</details></li>")  # fmt: skip


def _html_blocks(blocks: list[Block], shown: dict[Path, str]) -> list[str]:
    parts: list[str] = []
    for b in blocks:
        if isinstance(b, Collapsed):
            parts.append(f"<details><summary>{_inline(b.summary)}</summary>")
            parts += _html_blocks(b.blocks, shown)
            parts.append("</details>")
        elif isinstance(b, Heading):
            parts.append(f"<h{b.level}>{_inline(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            parts.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Bullets):
            parts.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Points):
            parts.append("<ul>" + "".join(_html_point(h, w) for h, w in b.items) + "</ul>")
        elif isinstance(b, Warn):
            parts.append(f"<div class='warn'><strong>Warning:</strong> {_inline(b.text)}</div>")
        elif isinstance(b, Table):
            parts += _html_table(b)
        elif isinstance(b, Image):
            parts.append(_html_figure(b, shown))
    return parts


def write(blocks: list[Block], out_dir: Path, title: str) -> tuple[Path, Path]:
    """Write report.md and report.html into ``out_dir``."""
    md = out_dir / "report.md"
    page = out_dir / "report.html"
    md.write_text(to_markdown(blocks, out_dir), encoding="utf-8")
    page.write_text(to_html(blocks, title), encoding="utf-8")
    return md, page
