"""Render an HTML file in headless Chromium: keep a screenshot, list what is cut off (a
test kit).

Used by tests/report/export/test_report_html.py, and for the docs' screenshot of a report
(from the repository root, with the venv active)::

    PYTHONPATH=tests python -c "from pathlib import Path; from support.screenshot import \
        screenshot; screenshot(Path('multirun/report/report.html'), Path('report.png'))"

Debian's ``chromium`` package; ``.ci/run`` installs it.
"""

from __future__ import annotations

import html as html_text
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

#: Chromium's names: Debian's package, then other distributions'.
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
#: What a page's console reports when its script throws or a resource does not load.
CONSOLE_ERRORS = ("Uncaught", "Failed to load resource")
#: A file:// load in Chromium's verbose log (``--v=1``): the page asked for this file.
_FILE_LOAD = re.compile(r"FileURLLoader::Start: (file://\S+)")
#: Where the injected script of :func:`overflowing` leaves its JSON in the dumped DOM.
_OVERFLOW_PRE = re.compile(r"<pre id=\"overflow\">(.*?)</pre>", re.DOTALL)
#: Runs once the page (its images too) has loaded: opens every <details> so that what a
#: reader can unfold is measured as well, then lists each element that reaches past the
#: viewport's right edge (less its vertical scrollbar: ``clientWidth``), or whose content
#: is wider than its box without scrolling, unless an ancestor scrolls horizontally
#: (overflow-x auto or scroll). 1 px of slack for sub-pixel layout.
_OVERFLOW_SCRIPT = """
<script>addEventListener('load', () => {
  for (const d of document.querySelectorAll('details')) d.open = true;
  const width = document.documentElement.clientWidth;
  const scrolls = el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  const inScroller = el => {
    for (let p = el.parentElement; p; p = p.parentElement) if (scrolls(p)) return true;
    return false;
  };
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
    + (el.classList.length ? '.' + [...el.classList].join('.') : '');
  const found = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (el.id === 'overflow' || el.tagName === 'SCRIPT' || inScroller(el)) continue;
    const right = el.getBoundingClientRect().right;
    const text = JSON.stringify((el.textContent || '').trim().slice(0, 60));
    if (right > width + 1) {
      found.push(`${name(el)} ${text}: right edge ${Math.round(right)} > ${width}`);
    } else if (getComputedStyle(el).display !== 'inline' && !scrolls(el)
               && el.scrollWidth > el.clientWidth + 1) {
      found.push(`${name(el)} ${text}: content ${el.scrollWidth} > box ${el.clientWidth}`);
    }
  }
  const out = document.createElement('pre');
  out.id = 'overflow';
  out.textContent = JSON.stringify({window: innerWidth, found: found});
  document.body.append(out);
});</script>
"""


def chromium() -> str | None:
    """The Chromium executable on PATH, or None."""
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


def screenshot(
    html: Path, png: Path, width: int = 1280, height: int = 2000, timeout_s: float = 120
) -> str:
    """Load ``html`` in headless Chromium, write a ``width`` x ``height`` PNG of it to
    ``png`` and return Chromium's stderr (its log, console messages included).

    ``--no-sandbox``: Chromium refuses to start as root with its sandbox (containers and
    CI run as root). ``--virtual-time-budget``: the screenshot waits until the page has
    loaded everything, or 5 s of virtual time. Raises ``FileNotFoundError`` without
    Chromium and ``RuntimeError`` when it exits non-zero or writes no PNG.
    """
    exe = chromium()
    if exe is None:
        raise FileNotFoundError(f"no Chromium on PATH (looked for {', '.join(CHROMIUM_NAMES)})")
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    proc = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--enable-logging=stderr", "--v=1", "--virtual-time-budget=5000",
         f"--window-size={width},{height}", f"--screenshot={png.resolve()}",
         html.resolve().as_uri()],
        capture_output=True, text=True, timeout=timeout_s, check=False,
    )  # fmt: skip
    if proc.returncode != 0 or not png.is_file():
        raise RuntimeError(
            f"chromium exited {proc.returncode} without a screenshot: {proc.stderr[-2000:]}"
        )
    return proc.stderr


def overflowing(html: Path, width: int, height: int = 1000, timeout_s: float = 120) -> list[str]:
    """What is cut off in ``html`` at a ``width`` px wide viewport: one line (tag, id and
    classes, the start of its text, by how much) per element that reaches past the
    viewport's right edge or whose content is wider than its box, unless it sits inside
    a horizontal scroll container. Every ``<details>`` is opened first.

    A copy of the page with a script appended (``<base>`` keeps its relative links) is
    loaded with ``--dump-dom``; the script leaves its list as JSON in the DOM. A
    screenshot shows the top of the page, and a box cut at the window's edge looks like
    one that ends there: this check measures every element. Raises
    ``FileNotFoundError`` without Chromium and ``RuntimeError`` when the list is missing
    from the dumped page or the viewport is not ``width`` wide.
    """
    exe = chromium()
    if exe is None:
        raise FileNotFoundError(f"no Chromium on PATH (looked for {', '.join(CHROMIUM_NAMES)})")
    page = html.read_text(encoding="utf-8")
    base = f"<base href='{html.resolve().parent.as_uri()}/'>"
    head = re.search(r"<head[^>]*>", page, re.IGNORECASE)
    page = page[: head.end()] + base + page[head.end() :] if head else base + page
    end = page.lower().rfind("</body>")
    page = page[:end] + _OVERFLOW_SCRIPT + page[end:] if end >= 0 else page + _OVERFLOW_SCRIPT
    with tempfile.TemporaryDirectory(prefix="overflow-") as tmp:
        copy = Path(tmp) / html.name
        copy.write_text(page, encoding="utf-8")
        proc = subprocess.run(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--virtual-time-budget=5000", f"--window-size={width},{height}", "--dump-dom",
             copy.as_uri()],
            capture_output=True, text=True, timeout=timeout_s, check=False,
        )  # fmt: skip
    match = _OVERFLOW_PRE.search(proc.stdout)
    if proc.returncode != 0 or match is None:
        raise RuntimeError(
            f"chromium exited {proc.returncode} without the overflow list: {proc.stderr[-2000:]}"
        )
    measured = json.loads(html_text.unescape(match.group(1)))
    if measured["window"] != width:  # a window frame would shift every right edge
        raise RuntimeError(f"the viewport is {measured['window']} px wide, not {width}")
    return [str(line) for line in measured["found"]]


def page_errors(stderr: str) -> list[str]:
    """The page's problems in Chromium's log: console lines with an uncaught error or a
    failed load, and every ``file://`` resource it asked for that does not exist.

    The second check is needed because headless Chromium does not print "Failed to load
    resource" for a missing local file (the message goes to DevTools only).
    """
    found = [line for line in stderr.splitlines() if any(e in line for e in CONSOLE_ERRORS)]
    for url in _FILE_LOAD.findall(stderr):
        path = Path(unquote(urlparse(url).path))
        if not path.exists():
            found.append(f"missing file: {url}")
    return found


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) of a PNG file, from its IHDR chunk; ValueError if it is no PNG."""
    head = path.read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
