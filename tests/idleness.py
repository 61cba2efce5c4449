"""Where a run's CPUs went idle, for making the suite faster: the machine's busy share
sampled every few seconds, and which tests were running while it was low. A test that
holds a worker while it waits (a timeout, a backoff, a server starting) leaves the
cores idle unless other workers fill them; this names those tests."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

WINDOW_S = 10.0  # the busy share is judged over windows this long
IDLE_BELOW = 0.7  # a window under this busy share counts as idle


class Sampler:
    """Samples ``read()`` -> (busy ticks, all ticks) every ``every`` seconds in a daemon
    thread until ``stop()``; ``samples``: (time.time(), busy, all)."""

    def __init__(self, read: Callable[[], tuple[float, float]], every: float = 2.0) -> None:
        self.samples: list[tuple[float, float, float]] = []
        self._read = read
        self._every = every
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="idle-sampler", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            busy, total = self._read()
            self.samples.append((time.time(), busy, total))
            if self._done.wait(self._every):
                return

    def stop(self) -> None:
        self._done.set()
        self._thread.join(5)


def idle_windows(
    samples: list[tuple[float, float, float]], window_s: float = WINDOW_S
) -> list[tuple[float, float, float]]:
    """(start, end, busy share) of each window of about ``window_s`` seconds whose busy
    share was under IDLE_BELOW."""
    out = []
    i = 0
    while i < len(samples) - 1:
        j = i + 1
        while j < len(samples) - 1 and samples[j][0] - samples[i][0] < window_s:
            j += 1
        (t0, b0, a0), (t1, b1, a1) = samples[i], samples[j]
        if a1 > a0 and (b1 - b0) / (a1 - a0) < IDLE_BELOW:
            out.append((t0, t1, (b1 - b0) / (a1 - a0)))
        i = j
    return out


def idle_report(
    samples: list[tuple[float, float, float]], spans: dict[str, tuple[str, float, float]]
) -> list[str]:
    """Markdown lines: the idle windows' time in all and the tests that ran in them the
    longest (``spans``: test id -> (worker, start, stop), time.time() seconds)."""
    windows = idle_windows(samples)
    if not windows:
        return [f"No window of {WINDOW_S:.0f} s had the CPUs under {IDLE_BELOW:.0%} busy."]
    start = samples[0][0]
    idle_s = sum(t1 - t0 for t0, t1, _ in windows)
    overlap: Counter[str] = Counter()
    for t0, t1, _ in windows:
        for test, (_worker, a, b) in spans.items():
            seconds = min(b, t1) - max(a, t0)
            if seconds > 0:
                overlap[test] += seconds
    lines = [
        f"Windows of {WINDOW_S:.0f} s with the CPUs under {IDLE_BELOW:.0%} busy: "
        f"{len(windows)}, {idle_s:.0f} s in all, at "
        + ", ".join(f"{t0 - start:.0f} s ({share:.0%})" for t0, _, share in windows[:40])
        + (" ..." if len(windows) > 40 else "")
        + ".",
        "",
        "| the tests running in them the longest | seconds in idle windows |",
        "| --- | ---: |",
        *(f"| {k} | {v:.1f} |" for k, v in overlap.most_common(20)),
    ]
    return lines
