"""Headless Chromium for tests: what a person's browser shows on a page, and a screenshot of it.

Chromium runs the page's JavaScript (Prefect's and MLflow's UIs are single-page apps) until the page
goes idle or the virtual-time budget runs out, then prints the rendered DOM; the text of that DOM is
what the tests assert on. `make install` installs Debian's chromium when it is missing.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _chromium(url: str, actions: list[str], budget_ms: int) -> subprocess.CompletedProcess:
    if CHROMIUM is None:
        raise RuntimeError("chromium is not installed: `apt-get install chromium` (make install does it as root)")
    profile = tempfile.mkdtemp(prefix="pa-chromium-")
    try:
        return subprocess.run(
            [
                CHROMIUM,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--hide-scrollbars",
                "--window-size=1400,1100",
                f"--user-data-dir={profile}",
                f"--virtual-time-budget={budget_ms}",
                *actions,
                url,
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def page_text(url: str, screenshot: Path, budget_ms: int = 20000) -> str:
    """The visible text of the rendered page (scripts and styles dropped), after saving a PNG of it."""
    # One launch does both (new headless mode): each launch renders the whole single-page app again.
    shown = _chromium(url, [f"--screenshot={screenshot}", "--dump-dom"], budget_ms)
    assert screenshot.is_file(), shown.stderr[-2000:]
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", shown.stdout, flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text)))
