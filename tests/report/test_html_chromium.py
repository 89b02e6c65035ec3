"""The HTML report rendered by a real browser (Debian's chromium, headless).

The screenshot stays in pytest's tmp_path; it is checked, never committed.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

WIDTH, HEIGHT = 1280, 4000


def screenshot(page: Path, shot: Path, profile: Path) -> np.ndarray:
    from matplotlib import image

    browser = shutil.which("chromium")
    if browser is None:
        pytest.fail("chromium is not installed: run scripts/install/report.sh")
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
               "--hide-scrollbars", f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}", page.as_uri()]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0 and shot.is_file(), result.stderr[-2000:]
    return image.imread(shot)[..., :3]


def coloured_pixels(pixels: np.ndarray) -> int:
    """Saturated pixels: the plot's markers and lines (the tables are black, white and grey)."""
    return int(((pixels.max(axis=-1) - pixels.min(axis=-1)) > 0.3).sum())


def test_html_report_renders_in_headless_chromium(tmp_path, synth, report):
    e = synth.episode
    records = [e("correct", harness=h, speedup=s, tokens=t, problem=f"graph/l1/p{i % 4}")
               for i, (h, s, t) in enumerate([("st", 1.3, 900), ("st", 0.7, 1200), ("mt-default", 2.2, 9000),
                                              ("mt-all", 3.1, 20000), ("mt-all", 1.1, 14000)])] \
        + [e("hack", harness="mt-default", problem="graph/l1/p1"), e("infra", harness="st")]
    run = synth.write_run(tmp_path / "run-a", synth.numbered(records), transcripts=True)
    out_dir = tmp_path / "html"
    code, _, err = report(run, "--format", "html", "--out", out_dir)
    assert code == 0, err

    page = out_dir / "index.html"
    with_plot = screenshot(page, tmp_path / "with-plot.png", tmp_path / "profile-1")
    assert with_plot.shape == (HEIGHT, WIDTH, 3)
    not_white = (with_plot.min(axis=-1) < 0.9).mean()
    assert not_white > 0.01, f"the page rendered blank ({not_white:.4f} of pixels not white)"
    assert (tmp_path / "with-plot.png").stat().st_size > 50_000

    # the same page without its plot file: the browser really drew pareto.png
    (out_dir / "pareto.png").unlink()
    without_plot = screenshot(page, tmp_path / "without-plot.png", tmp_path / "profile-2")
    assert coloured_pixels(with_plot) - coloured_pixels(without_plot) > 2000
