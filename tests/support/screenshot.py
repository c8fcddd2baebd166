"""Render an HTML file in headless Chromium and keep a screenshot (a test kit).

Used by tests/report/export/test_report_html.py, and for the docs' screenshot of a report
(from the repository root, with the venv active)::

    PYTHONPATH=tests python -c "from pathlib import Path; from support.screenshot import \
        screenshot; screenshot(Path('multirun/report/report.html'), Path('report.png'))"

Debian's ``chromium`` package; ``.ci/run`` installs it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlparse

#: Chromium's names: Debian's package, then other distributions'.
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
#: What a page's console reports when its script throws or a resource does not load.
CONSOLE_ERRORS = ("Uncaught", "Failed to load resource")
#: A file:// load in Chromium's verbose log (``--v=1``): the page asked for this file.
_FILE_LOAD = re.compile(r"FileURLLoader::Start: (file://\S+)")


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
