"""The browser the dashboard's page tests drive: Playwright with Debian's Chromium, a
fresh profile per test."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ui.chromium import ARGS, CHROMIUM, LOAD_S


@pytest.fixture(scope="module")
def playwright() -> Iterator[Any]:
    with pytest.importorskip("playwright.sync_api").sync_playwright() as p:
        yield p


@pytest.fixture
def browser(playwright: Any, tmp_path: Path) -> Iterator[Any]:
    """A fresh Chromium (its own profile directory) for one test."""
    profile = tempfile.mkdtemp(prefix="topo-chromium-")
    context = playwright.chromium.launch_persistent_context(
        profile,
        executable_path=CHROMIUM,
        args=ARGS,
        headless=True,
        viewport={"width": 1400, "height": 900},
    )
    context.set_default_timeout(LOAD_S * 1000)
    try:
        yield context
    finally:
        context.close()
        shutil.rmtree(profile, ignore_errors=True)
