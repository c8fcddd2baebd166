"""report.html as a person opens it: rendered in headless Chromium (issue 25, point 7).

A report over synthetic training and edge cells (tests/support/synthetic.py, replaying
the 2021 study's measurements) with its figures is loaded in Debian's ``chromium``; the
test fails on an uncaught script error or a resource that did not load, and keeps the
screenshot under its tmp folder. Without Chromium it skips here and fails in CI
(``CI=true``; ``.ci/run`` installs Chromium).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import synthetic
from support.screenshot import chromium, page_errors, png_size, screenshot

from rlperf.report import build_report
from tests.conftest import THESIS

WIDTH, HEIGHT = 1280, 2000


def _need_chromium() -> None:
    if chromium() is not None:
        return
    why = (
        "no chromium on PATH: install it with `apt-get install -y --no-install-recommends "
        "chromium` (.ci/run does)"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must render report.html: {why}")
    pytest.skip(why)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory):
    _need_chromium()  # before the report: it is built only to be rendered
    root = tmp_path_factory.mktemp("multirun") / "2026-12-01"
    synthetic.study_training_sweep(THESIS, root / "10-00-00", iterations=6, n_cells=4)
    synthetic.study_inference_sweep(THESIS, root / "11-00-00", steps_per_episode=50)
    return build_report([root], None, None, False)


@pytest.mark.slow  # the report's figures take 10-25 s on a shared 2-core machine
def test_report_html_renders_in_chromium_without_errors(report, tmp_path: Path) -> None:
    assert {"intervals", "latency", "fidelity_latency"} <= set(report.figures)
    assert not [why for why in report.figures_skipped.values() if why.startswith("failed")]
    html = report.html.read_text()
    assert html.count("src='data:image/png;base64,") >= len(report.figures)  # embedded
    png = tmp_path / "report.png"
    stderr = screenshot(report.html, png, WIDTH, HEIGHT)
    (tmp_path / "chromium.log").write_text(stderr)
    assert page_errors(stderr) == []
    assert report.html.resolve().as_uri() in stderr  # Chromium loaded the report itself
    assert png_size(png) == (WIDTH, HEIGHT)
    assert png.stat().st_size > 50_000  # text, tables and a figure, not a blank page


def test_a_broken_page_is_caught(tmp_path: Path) -> None:
    """The checks can fail: a throwing script and a missing image are both reported."""
    _need_chromium()
    page = tmp_path / "broken.html"
    page.write_text(
        "<html><body><h1>broken</h1><img src='figures/absent.png'>"
        "<script>throw new Error('boom')</script></body></html>"
    )
    stderr = screenshot(page, tmp_path / "broken.png", 640, 480)
    problems = page_errors(stderr)
    assert any("Uncaught Error: boom" in p for p in problems)
    assert f"missing file: {(tmp_path / 'figures' / 'absent.png').as_uri()}" in problems
    assert png_size(tmp_path / "broken.png") == (640, 480)
