"""Render a report document to ``report.md`` and a self-contained ``report.html``.

The document is a list of blocks built by :mod:`rlperf.report.document`; both
renderers walk the same list, so the two files always say the same thing. The
HTML embeds every PNG as base64 and needs nothing else (no CSS or JS files).
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


Block = Heading | Para | Bullets | Warn | Table | Image | Collapsed


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


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1200px;
margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
table{border-collapse:collapse;font-size:12px;margin:0.5em 0 1.5em;display:block;overflow-x:auto}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;white-space:nowrap}
th{background:#f2f2f2}tr:nth-child(even) td{background:#fafafa}
code{background:#f4f4f4;padding:0 3px;border-radius:3px;font-size:90%}
.warn{background:#fff4e5;border-left:4px solid #e08a00;padding:0.5em 1em;margin:1em 0}
figure{margin:1em 0 2em}figure img{max-width:100%;border:1px solid #eee}
figcaption{font-style:italic;font-size:13px;color:#555}
.caption{font-style:italic;color:#555;font-size:13px}
details{margin:0.5em 0 1em}summary{cursor:pointer;color:#0366d6}
"""


def to_html(blocks: list[Block], title: str) -> str:
    """A single self-contained HTML page (figures embedded as base64 PNG)."""
    parts = [
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        *_html_blocks(blocks),
        "</body></html>",
    ]
    return "\n".join(parts)


def _html_blocks(blocks: list[Block]) -> list[str]:
    parts: list[str] = []
    for b in blocks:
        if isinstance(b, Collapsed):
            parts.append(f"<details><summary>{_inline(b.summary)}</summary>")
            parts += _html_blocks(b.blocks)
            parts.append("</details>")
        elif isinstance(b, Heading):
            parts.append(f"<h{b.level}>{_inline(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            parts.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Bullets):
            parts.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Warn):
            parts.append(f"<div class='warn'><strong>Warning:</strong> {_inline(b.text)}</div>")
        elif isinstance(b, Table):
            if b.caption:
                parts.append(f"<p class='caption'>{_inline(b.caption)}</p>")
            head = "".join(f"<th>{_inline(str(c))}</th>" for c in b.df.columns)
            body = "".join(
                "<tr>" + "".join(f"<td>{_inline(_text(v))}</td>" for v in row) + "</tr>"
                for row in b.df.itertuples(index=False)
            )
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif isinstance(b, Image):
            data = base64.b64encode(b.path.read_bytes()).decode("ascii")
            parts.append(
                f"<figure><img alt='{html.escape(b.caption)}' "
                f"src='data:image/png;base64,{data}'>"
                f"<figcaption>{_inline(b.caption)}</figcaption></figure>"
            )
    return parts


def write(blocks: list[Block], out_dir: Path, title: str) -> tuple[Path, Path]:
    """Write report.md and report.html into ``out_dir``."""
    md = out_dir / "report.md"
    page = out_dir / "report.html"
    md.write_text(to_markdown(blocks, out_dir), encoding="utf-8")
    page.write_text(to_html(blocks, title), encoding="utf-8")
    return md, page
