"""Launchpad's own test files, run with pytest against ``topo.launchpad``.

The ``launchpad`` package the tests import is the shim in ``bench/launchpad_shim/``: its
modules are built from topo's public objects (``lp_shim_modules.py`` says which), so a
test passes only if topo behaves as Launchpad does. Tests that reach into Launchpad's
internals (worker manager attributes, ``node._input_handles``, mocked subprocesses) are
not run: they are reported as "uses internals", each with what it uses (``INTERNALS``).
Each test file runs in a pytest process of its own; a test has ``--timeout`` seconds.

Run:  ``python bench/launchpad_suite.py [--checkout DIR] [--only SUBSTRING ...] [--logs DIR]``.
Without ``--checkout`` the HEAD of the Launchpad mirror is extracted with ``git archive``.
Writes bench/results/launchpad_suite.json and .md (with ``--only``: prints only, unless
``--out`` is given).
"""

from __future__ import annotations

import argparse
import ast
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHIM = Path(__file__).resolve().parent / "launchpad_shim"
MIRROR = Path("/work/.mirror/google-deepmind+launchpad/repo")
OUT = ROOT / "bench" / "results" / "launchpad_suite"

_WM = "Launchpad's WorkerManager (its launcher's internals; topo's launcher is its own)"
# test file -> {test name: the internal it uses}; "*" stands for every test of the file.
INTERNALS: dict[str, dict[str, str]] = {
    "launchpad/launch/worker_manager_test.py": {"*": _WM},
    "launchpad/launch/signal_handling_test.py": {
        "*": "launchpad.launch.signal_handling (the launcher's SIGINT/SIGQUIT handlers)"
    },
    "launchpad/launch/run_locally/decorate_output_test.py": {
        "*": "Launchpad's decorate_output terminal script (topo prefixes node output itself)"
    },
    "launchpad/launch/test_multi_processing/launch_test.py": {
        "test_wait_for_one": "the launcher's _active_workers / _process_workers",
        "test_grouping": "the launcher's _active_workers / _process_workers",
    },
    "launchpad/launch/serialization_test.py": {
        "test_lru_cache": "serialization.enable_lru_cache_pickling_once (a hook of "
        "Launchpad's own pickling)"
    },
    "launchpad/nodes/multi_threading_colocation/node_test.py": {
        "test_exception_propagation": _WM + " and colocation.run() in the test thread",
        "test_first_completed": _WM + " and colocation.run() in the test thread",
        "test_all_completed": _WM + " and colocation.run() in the test thread",
    },
    "launchpad/nodes/multi_processing_colocation/node_test.py": {
        "*": "mocks subprocess.Popen, tempfile.mkdtemp and shutil.rmtree inside Launchpad's "
        "colocation run()"
    },
    "launchpad/nodes/courier/node_test.py": {
        "test_cyclic_reference": "node._input_handles (topo's public node.input_handles "
        "holds the same)"
    },
    "launchpad/nodes/reverb/node_test.py": {
        "test_insert": "node._server (the node's reverb.Server, which the test stops after "
        "running the node by hand)"
    },
}


def extract_mirror(dest: Path) -> tuple[Path, str]:
    """HEAD of the Launchpad mirror, extracted into ``dest``; (the path, its commit)."""
    commit = subprocess.run(
        ["git", "-C", str(MIRROR), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    archive = subprocess.run(
        ["git", "-C", str(MIRROR), "archive", "--format=tar", "HEAD"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest, commit


def discover(checkout: Path) -> list[str]:
    """Every ``*_test.py`` of the checkout (Launchpad's and courier's), relative paths."""
    return sorted(
        str(p.relative_to(checkout))
        for top in ("launchpad", "courier")
        for p in (checkout / top).rglob("*_test.py")
    )


def listed_tests(path: Path) -> list[str]:
    """``Class.test`` for every test method of a file, read without importing it (absl
    ``parameters``/``named_parameters`` expanded as absl names them)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for fn in cls.body:
            if not isinstance(fn, ast.FunctionDef) or not fn.name.startswith("test"):
                continue
            names = [fn.name]
            for dec in fn.decorator_list:
                if isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute):
                    if dec.func.attr == "parameters":
                        names = [f"{fn.name}{i}" for i in range(len(dec.args))]
                    elif dec.func.attr == "named_parameters":
                        names = [f"{fn.name}_{_first(a)}" for a in dec.args]
            found += [f"{cls.name}.{name}" for name in names]
    return found


def _first(node: ast.expr) -> str:
    """The name of a ``named_parameters`` case: its tuple's first element."""
    if isinstance(node, ast.Tuple) and isinstance(node.elts[0], ast.Constant):
        return str(node.elts[0].value)
    return "?"


def _reason(text: str | None) -> str:
    """The first line of a failure message, cut to a readable length."""
    line = next((x.strip() for x in (text or "").splitlines() if x.strip()), "")
    line = re.sub(r" id='\d+'", "", line)  # a mock's id changes from run to run
    return line if len(line) <= 240 else line[:237] + "..."


def parse_junit(xml: Path) -> list[dict[str, str]]:
    """One entry per test case of a pytest junit file: test, status, reason."""
    results: list[dict[str, str]] = []
    for case in ET.parse(xml).getroot().iter("testcase"):
        cls = case.get("classname", "").rsplit(".", 1)[-1]
        test = f"{cls}.{case.get('name')}" if cls else str(case.get("name"))
        status, reason = "passed", ""
        for child in case:
            message = child.get("message") or child.text
            if message == "collection failure":  # the error is the last "E " line
                errors = [x[1:] for x in (child.text or "").splitlines() if x.startswith("E ")]
                message = errors[-1] if errors else message
            if child.tag in ("failure", "error"):
                status, reason = "failed", _reason(message)
                break
            if child.tag == "skipped":
                text = _reason(message)
                if "uses internals: " in text:
                    status, reason = "internals", text.split("uses internals: ", 1)[1]
                else:
                    status, reason = "skipped", text
        earlier = next((r for r in results if r["test"] == test), None)
        if earlier is None:
            results.append({"test": test, "status": status, "reason": reason})
        elif status == "failed":  # a failure in teardown comes as a second entry
            first = earlier["reason"] if earlier["status"] == "failed" else ""
            earlier.update(status="failed", reason="; then ".join(filter(None, [first, reason])))
    return results


def _become_subreaper() -> None:
    """Processes a test run leaves behind become children of this script (Linux's child
    subreaper), so :func:`_leftovers` finds them by parent pid."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _leftovers() -> list[int]:
    """Pids of live processes whose parent is this script (none while no test runs)."""
    while True:  # reap those that ended
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if fields and int(fields[1]) == os.getpid():
            pids.append(int(entry.name))
    return pids


def run_file(rel: str, checkout: Path, work: Path, timeout: float) -> dict[str, Any]:
    """Run one Launchpad test file under pytest; its tests with their status."""
    source = checkout / rel
    listed = listed_tests(source)
    internals = INTERNALS.get(rel, {})
    if "*" in internals:
        why = internals["*"]
        tests = [{"test": t, "status": "internals", "reason": why} for t in listed]
        return {"file": rel, "tests": tests, "seconds": 0.0}
    flat = rel.replace("/", "__")
    case = work / "cases" / flat
    case.parent.mkdir(exist_ok=True)
    shutil.copy(source, case)
    xml = work / f"{flat}.xml"
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join(
            [str(SHIM), str(case.parent), str(ROOT), env.get("PYTHONPATH", "")]
        ),
        LAUNCHPAD_CHECKOUT=str(checkout),
        LP_SUITE_INTERNALS=json.dumps(internals),
    )
    command = [
        sys.executable, "-m", "pytest", str(case), "-q", "-p", "lp_suite_plugin",
        "-p", "no:cacheprovider", f"--rootdir={work}", f"-c={work / 'pytest.ini'}",
        f"--junitxml={xml}", f"--timeout={timeout}", "-o", "junit_family=xunit1",
    ]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.Popen(
        command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    limit = timeout * max(1, len(listed)) + 120
    try:
        output, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the session this script started
        output, _ = proc.communicate()
    seconds = time.monotonic() - started
    (work / f"{flat}.log").write_bytes(output)
    left = _leftovers()
    for pid in left:  # processes this run started and did not end
        os.kill(pid, signal.SIGKILL)
    _leftovers()  # reaps them
    tests = parse_junit(xml) if xml.exists() else []
    collected = {t["test"] for t in tests}
    broken = [t for t in tests if t["test"].split(".")[-1] == flat.removesuffix(".py")]
    if not tests or broken:  # the file did not import, or pytest did not finish
        why = broken[0]["reason"] if broken else f"pytest did not finish in {limit:.0f} s"
        tests = [t for t in tests if t not in broken]
        tests += [
            {"test": t, "status": "failed", "reason": f"not run: {why}"}
            for t in listed
            if t not in collected
        ]
    result: dict[str, Any] = {"file": rel, "tests": tests, "seconds": round(seconds, 1)}
    if left:
        result["leftover_pids"] = left
    return result


def totals(files: list[dict[str, Any]]) -> dict[str, int]:
    """Test counts by status over all files."""
    counts = {"tests": 0, "passed": 0, "failed": 0, "internals": 0, "skipped": 0}
    for f in files:
        for t in f["tests"]:
            counts["tests"] += 1
            counts[t["status"]] += 1
    return counts


def markdown(report: dict[str, Any]) -> str:
    """The report as a Markdown page."""
    lines = [
        "# Launchpad's own tests on topo.launchpad",
        "",
        f"Launchpad checkout: `{report['checkout']}` (commit `{report['commit']}`), "
        f"{report['date']}, Python {report['python']}. "
        "Made by `python bench/launchpad_suite.py`; the `launchpad` package the tests "
        "import is `bench/launchpad_shim/`, built from topo's public objects.",
        "",
    ]
    for top, what in (("launchpad/", "Launchpad's tests"), ("courier/", "courier's tests")):
        c = totals([f for f in report["files"] if f["file"].startswith(top)])
        if not c["tests"]:
            continue
        runnable = c["tests"] - c["internals"] - c["skipped"]
        lines.append(
            f"- {what} (`{top}`): **{c['passed']} of {c['tests']}** pass, {c['failed']} "
            f"fail, {c['internals']} use Launchpad's internals (not run), {c['skipped']} "
            f"are skipped by the test file itself; {c['passed']} of the {runnable} that "
            "use only public behaviour pass."
        )
    lines += ["", "| file | test | result | reason |", "|---|---|---|---|"]
    for f in report["files"]:
        for t in f["tests"]:
            reason = t["reason"].replace("|", "\\|")
            lines.append(f"| {f['file']} | {t['test']} | {t['status']} | {reason} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkout", type=Path, help="a Launchpad checkout (default: mirror)")
    parser.add_argument("--only", action="append", help="run files whose path contains this")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per test")
    parser.add_argument("--out", type=Path, help="write OUT.json and OUT.md")
    parser.add_argument("--logs", type=Path, help="keep each file's pytest output here")
    args = parser.parse_args()
    out = args.out or (None if args.only else OUT)
    _become_subreaper()
    with tempfile.TemporaryDirectory(prefix="lp-suite-") as tmp:
        work = Path(tmp)
        (work / "pytest.ini").write_text("[pytest]\naddopts = -q\n")
        if args.checkout:
            checkout, commit = args.checkout.resolve(), "(given checkout)"
        else:
            (work / "launchpad-src").mkdir()
            checkout, commit = extract_mirror(work / "launchpad-src")
        files = [f for f in discover(checkout) if not args.only or any(s in f for s in args.only)]
        results = []
        for rel in files:
            result = run_file(rel, checkout, work, args.timeout)
            if args.logs and (work / f"{rel.replace('/', '__')}.log").exists():
                args.logs.mkdir(parents=True, exist_ok=True)
                shutil.copy(work / f"{rel.replace('/', '__')}.log", args.logs)
            results.append(result)
            counts = totals([result])
            print(
                f"{rel}: {counts['passed']} passed, {counts['failed']} failed, "
                f"{counts['internals']} internals, {counts['skipped']} skipped "
                f"({result['seconds']} s)",
                flush=True,
            )
            for t in result["tests"]:
                if t["status"] == "failed":
                    print(f"    FAILED {t['test']}: {t['reason']}", flush=True)
            if result.get("leftover_pids"):
                print(f"    LEFT OVER (killed): {result['leftover_pids']}", flush=True)
    report = {
        "checkout": str(args.checkout or MIRROR),
        "commit": commit,
        "date": time.strftime("%Y-%m-%d"),
        "python": sys.version.split()[0],
        "totals": totals(results),
        "files": results,
    }
    print(json.dumps(report["totals"]))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
        out.with_suffix(".md").write_text(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
