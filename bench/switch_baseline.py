"""The best normalised reward on the switch riddle without communication.

Without the bulb a prisoner knows only the day and how often he has been in the room,
so a policy is a table: tell or wait, for each (day, own visits). This script scores a
table exactly, over every one of the n**T equally likely schedules, and finds the best
one by hill climbing from many random tables (flip the entry that helps most, until
none does). DIAL's tests and benchmark compare against this figure. Writes
bench/results/switch_baseline.json. Rerun: ``.venv/bin/python bench/switch_baseline.py``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.agents.switch import episode_limit  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def score(table: dict[tuple[int, int], bool], n: int) -> float:
    """Expected return over the oracle's, exactly, for the no-communication policy."""
    days = episode_limit(n)
    total = oracle = 0
    for schedule in itertools.product(range(n), repeat=days):
        oracle += len(set(schedule)) == n
        visits = [0] * n
        seen: set[int] = set()
        for day, who in enumerate(schedule):
            visits[who] += 1
            seen.add(who)
            if table[(day, visits[who])]:
                total += 1 if len(seen) == n else -1
                break
    return total / oracle


def best_table(n: int, starts: int, seed: int) -> tuple[float, dict[tuple[int, int], bool]]:
    """Hill climbing from ``starts`` random tables; the best score and table found."""
    days = episode_limit(n)
    states = [(d, c) for d in range(days) for c in range(1, d + 2)]
    rng = np.random.default_rng(seed)
    best: tuple[float, dict[tuple[int, int], bool]] = (-2.0, {})
    for _ in range(starts):
        table = {s: bool(rng.random() < 0.3) for s in states}
        value = score(table, n)
        improved = True
        while improved:
            improved = False
            for s in states:
                table[s] = not table[s]
                flipped = score(table, n)
                if flipped > value + 1e-12:
                    value, improved = flipped, True
                else:
                    table[s] = not table[s]
        if value > best[0]:
            best = (value, dict(table))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--starts", type=int, default=30)
    args = parser.parse_args()
    value, table = best_table(args.agents, args.starts, seed=0)
    tell = sorted(f"day {d}, visit {c}" for (d, c), t in table.items() if t)
    result = {"agents": args.agents, "best_normalised_reward": round(value, 4), "tells_on": tell}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "switch_baseline.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
