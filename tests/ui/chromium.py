"""How the dashboard's tests and benchmark start Debian's Chromium under Playwright:
headless, with nothing that would reach the network on its own."""

from __future__ import annotations

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LOAD_S = 180.0  # s a page may take to show something: generous, the suite runs beside two
# busy loops on 2 cores
