"""The example end-to-end tests, many rounds in a row, beside two busy loops.

Issue 28 asks that the example agents' end-to-end tests pass 10 times in a row on a
loaded machine: a node blocked in Reverb (or anywhere) must see the stop within the grace
whatever the load. This starts two busy loops (``sh -c 'while :; do :; done'``, killed by
pid at the end), then runs each group of pytest node ids ``--rounds`` times in a row
(default 10) with ``python -m pytest -x -q -p no:randomly`` (the project's pytest config
adds its 300 s per-test timeout), and records per round and per test: passed, failed or
not run (``-x`` stops a round at its first failure), the wall time, and ``/proc/loadavg``
before and after. A failing round's pytest temp dir (run dirs, node logs with the stacks of
nodes killed after the grace) is kept and named in the report; a passing one is removed.

Tests on the SSH test hosts (tests/backends/ssh, the Ray clusters of tests/backends/ray)
need them up: this holds as many as the tests' session fixture asks for
(``testhosts.shared``, tests/backends/ssh/testhosts.py) for the whole run, so that the
rounds share one set: hosts up already are reused, else brought up once, and taken down
at the end by the last of their users to leave.

Run:  ``python bench/e2e_under_load.py [--rounds 10] [--group agents_dqn ...] [NODE_ID ...]``
(node ids given: one group of them). Writes bench/results/e2e_under_load[-LABEL].md/.json
after every round, so an interrupted run still reports what it saw.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
TEMP = Path(os.environ.get("E2E_UNDER_LOAD_TMP", "/tmp/e2e_under_load"))
PYTEST = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly"]

_DQN = "tests/agents/test_dqn_programs.py::test_the_dqn_example_learns_and_stops_by_itself"
_OFFLINE = "tests/agents/test_offline_e2e.py::test_acme_offline_learns_and_stops_by_itself"
# Groups of about 6 minutes or less each on a loaded 2-core machine (``--durations``).
GROUPS: dict[str, list[str]] = {
    "agents_dqn": [_DQN],
    "agents_other": [
        _OFFLINE,
        "tests/agents/test_mava_dial_run.py::test_dial_trains_on_fresh_batches_and_stops",
        "tests/agents/test_clean_stop.py",
    ],
    "hosts": [
        "tests/backends/ssh/test_ssh_run.py::test_distributed_dqn_runs_across_hosts",
        "tests/backends/ray/test_ray_cluster.py::test_distributed_dqn_runs_across_ray_nodes",
    ],
}
NEEDS_HOSTS = ("tests/backends/ssh/", "tests/backends/ray/test_ray_cluster.py")


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages."""
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def start_busy_loops(n: int = 2) -> list[subprocess.Popen[bytes]]:
    """``n`` shell busy loops, each its own process (killed by pid in :func:`stop_busy`)."""
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(n)]


def stop_busy(loops: list[subprocess.Popen[bytes]]) -> None:
    """Kill the busy loops by pid and reap them."""
    for loop in loops:
        if loop.poll() is None:
            os.kill(loop.pid, signal.SIGKILL)
        loop.wait(10)


def outcomes(junit: Path) -> dict[str, dict[str, Any]]:
    """Per test (node id as pytest prints it): outcome and seconds, from a JUnit XML file."""
    out: dict[str, dict[str, Any]] = {}
    if not junit.exists():
        return out
    for case in ET.parse(junit).getroot().iter("testcase"):
        path = case.get("classname", "").replace(".", "/")
        nodeid = f"{path}.py::{case.get('name')}"
        kinds = {child.tag for child in case}
        if "skipped" in kinds:
            outcome = "skipped"
        elif kinds & {"failure", "error"}:
            outcome = "failed"
        else:
            outcome = "passed"
        message = ""
        for child in case:
            if child.tag in ("failure", "error"):
                message = (child.get("message") or "")[:500]
        out[nodeid] = {
            "outcome": outcome,
            "seconds": round(float(case.get("time", 0)), 1),
            "message": message,
        }
    return out


def collect(nodeids: list[str]) -> list[str]:
    """The test ids ``nodeids`` expand to (parametrised cases one by one)."""
    done = subprocess.run(
        [*[a for a in PYTEST if a != "-q"], "--collect-only", *nodeids],  # one id a line
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return [line for line in done.stdout.splitlines() if "::" in line]


def run_round(group: str, nodeids: list[str], index: int) -> dict[str, Any]:
    """One pytest run of the group's tests; its record."""
    base = TEMP / f"{group}-{index:02d}"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    junit = base / "junit.xml"
    before = loadavg()
    started = time.monotonic()
    done = subprocess.run(
        [*PYTEST, f"--basetemp={base / 'tmp'}", f"--junitxml={junit}", *nodeids],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - started
    tests = outcomes(junit)
    (base / "pytest.out").write_text(done.stdout + done.stderr)
    ok = done.returncode == 0
    record = {
        "group": group,
        "round": index,
        "passed": ok,
        "returncode": done.returncode,
        "seconds": round(seconds, 1),
        "load_before": before,
        "load_after": loadavg(),
        "tests": tests,
        "kept": None if ok else str(base),
        "tail": "" if ok else (done.stdout + done.stderr)[-3000:],
    }
    if ok:
        shutil.rmtree(base, ignore_errors=True)
    return record


def hold_hosts(held: contextlib.ExitStack) -> str:
    """Hold the SSH test hosts until ``held`` closes, as many as the tests' session
    fixture asks for (fewer, and a test's own ask for more would fail while this holds
    them); a note on them for the report."""
    sys.path.insert(0, str(ROOT))
    from tests.backends.ssh import testhosts
    from tests.conftest import RAY_HOSTS, SLURM_HOSTS, SSH_HOSTS

    reason = testhosts.unavailable()
    if reason:
        return f"no test hosts: {reason} (those tests skip)"
    wanted = SSH_HOSTS + RAY_HOSTS + SLURM_HOSTS
    before = testhosts.existing()
    held.enter_context(testhosts.shared(wanted))
    if before is not None and len(before.names) >= wanted:
        return f"{wanted} test hosts that were up already (reused)"
    return f"{wanted} test hosts brought up for this run (taken down by their last user)"


def summary(records: list[dict[str, Any]], cases: dict[str, list[str]]) -> dict[str, Any]:
    """Per test: rounds passed, failed, not run; per group: passes in a row at the end."""
    per_test: dict[str, dict[str, int]] = {}
    for group, ids in cases.items():
        rows = [r for r in records if r["group"] == group]
        for test in ids:
            seen = [r["tests"].get(test, {}).get("outcome", "not run") for r in rows]
            per_test[test] = {k: seen.count(k) for k in ("passed", "failed", "skipped", "not run")}
            per_test[test]["rounds"] = len(rows)
    streak: dict[str, int] = {}
    for group in cases:
        rows = [r for r in records if r["group"] == group]
        n = 0
        for r in reversed(rows):
            if not r["passed"]:
                break
            n += 1
        streak[group] = n
    return {"per_test": per_test, "passing_streak": streak}


def write(label: str, meta: dict[str, Any], records: list[dict[str, Any]], cases: Any) -> None:
    """bench/results/e2e_under_load[-label].json and .md."""
    name = "e2e_under_load" + (f"-{label}" if label else "")
    RESULTS.mkdir(parents=True, exist_ok=True)
    summed = summary(records, cases)
    data = {**meta, "cases": cases, "rounds": records, **summed}
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
    lines = [
        "# Example end-to-end tests beside two busy loops",
        "",
        f"{meta['when']} on {meta['machine']}; `python bench/e2e_under_load.py`"
        f" {' '.join(meta['argv'])}; {meta['rounds_wanted']} rounds per group, each one"
        f" `{' '.join(PYTEST[1:])}` over the group's tests"
        f"{'; the groups ran at the same time' if meta['parallel'] else ''}; {meta['hosts']}.",
        "Load is /proc/loadavg (1, 5, 15 min) before and after each round: the two busy"
        " loops plus whatever else ran on the machine (other test runs shared it).",
        "",
        "## Per test",
        "",
        "| test | passed | failed | not run (after an earlier failure) | rounds |",
        "|---|---|---|---|---|",
    ]
    for test, c in summed["per_test"].items():
        lines.append(
            f"| `{test.split('/', 1)[1]}` | {c['passed']} | {c['failed']} | {c['not run']}"
            f" | {c['rounds']} |"
        )
    lines += ["", "## Rounds", "", "| group | round | result | wall s | load before | load after |"]
    lines.append("|---|---|---|---|---|---|")
    for r in records:
        lines.append(
            f"| {r['group']} | {r['round']} | {'pass' if r['passed'] else 'FAIL'}"
            f" | {r['seconds']:.0f} | {' '.join(map(str, r['load_before']))}"
            f" | {' '.join(map(str, r['load_after']))} |"
        )
    fails = [r for r in records if not r["passed"]]
    if fails:
        lines += ["", "## Failures", ""]
        for r in fails:
            bad = {t: v["message"] for t, v in r["tests"].items() if v["outcome"] == "failed"}
            lines.append(f"- {r['group']} round {r['round']} (kept in `{r['kept']}`):")
            for test, message in bad.items() or [("(no test recorded)", r["tail"][-300:])]:
                lines.append(f"  - `{test}`: {message.splitlines()[0] if message else ''}")
    streaks = ", ".join(f"{g}: {n}" for g, n in summed["passing_streak"].items())
    lines += ["", f"Passing rounds in a row at the end, per group: {streaks}.", ""]
    (RESULTS / f"{name}.md").write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("nodeids", nargs="*", help="pytest node ids (default: the groups)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--group", action="append", choices=sorted(GROUPS), default=None)
    parser.add_argument("--label", default="", help="suffix of the results' file names")
    parser.add_argument("--busy", type=int, default=2, help="busy loops beside the tests")
    parser.add_argument(
        "--parallel", action="store_true", help="run the groups at the same time, not in turn"
    )
    args = parser.parse_args(argv)
    groups = (
        {"given": args.nodeids} if args.nodeids else {g: GROUPS[g] for g in args.group or GROUPS}
    )
    cases = {g: collect(ids) for g, ids in groups.items()}
    wanted_hosts = any(i.startswith(NEEDS_HOSTS) for ids in groups.values() for i in ids)
    meta = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "argv": sys.argv[1:] if argv is None else argv,
        "rounds_wanted": args.rounds,
        "busy_loops": args.busy,
        "parallel": args.parallel,
        "hosts": "no test hosts needed",
    }
    records: list[dict[str, Any]] = []
    lock = threading.Lock()

    halt = threading.Event()  # Ctrl-C: no further rounds start

    def rounds(group: str, ids: list[str]) -> None:
        for index in range(1, args.rounds + 1):
            if halt.is_set():
                return
            record = run_round(group, ids, index)
            with lock:
                records.append(record)
                write(args.label, meta, records, cases)
            verdict = "pass" if record["passed"] else f"FAIL (kept in {record['kept']})"
            print(
                f"{group} round {index}: {verdict} in {record['seconds']:.0f}s,"
                f" load {record['load_before']} -> {record['load_after']}",
                flush=True,
            )

    with contextlib.ExitStack() as held:  # the test hosts and the busy loops, for the rounds
        if wanted_hosts:
            meta["hosts"] = hold_hosts(held)
        loops = start_busy_loops(args.busy)
        held.callback(stop_busy, loops)  # (first: the hosts after)
        meta["busy_pids"] = [p.pid for p in loops]
        try:
            if args.parallel:  # each group's rounds beside the others' (more load, less time)
                threads = [threading.Thread(target=rounds, args=item) for item in groups.items()]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
            else:
                for item in groups.items():
                    rounds(*item)
        except KeyboardInterrupt:
            halt.set()
            raise
    write(args.label, meta, records, cases)
    return 0 if all(r["passed"] for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
