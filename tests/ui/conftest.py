"""The browser the dashboard's page tests drive: Playwright with Debian's Chromium, one
per test module, and a fresh context (its own cookies, storage and cache) per test:
starting Chromium is the costly part, a context is not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.ui.chromium import ARGS, CHROMIUM, LOAD_S


@pytest.fixture(scope="module")
def playwright() -> Iterator[Any]:
    with pytest.importorskip("playwright.sync_api").sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def chromium(playwright: Any) -> Iterator[Any]:
    """One Chromium for the module's tests."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
    try:
        yield browser
    finally:
        browser.close()


@pytest.fixture
def browser(chromium: Any) -> Iterator[Any]:
    """A fresh browser context for one test (as isolated as a new profile)."""
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(LOAD_S * 1000)
    try:
        yield context
    finally:
        context.close()
