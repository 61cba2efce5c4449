"""Preflight of the ``ssh`` backend: every host checked before anything starts.

One command per host (run on all hosts at once) answers: is the interpreter
there, which Python it is, does topo import at the launcher's version, and does
every target module of the program import there (with the same ``PYTHONPATH``
and working directory the agent will have). All failing hosts are reported
together, one diagnostic each, and nothing is started. Also: which address of this
machine the hosts reach, and whether the launcher can listen on an address.
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Mapping

import topo
from topo.backends.ssh.inventory import HostSpec
from topo.diagnostics import Diagnostic

MARK = "TOPO-HOSTCHECK "
CHECK_TIMEOUT_S = 60.0  # importing targets may import JAX or TensorFlow

_SCRIPT = """
import importlib, json, sys
r = {"python": "%d.%d.%d" % sys.version_info[:3]}
try:
    import topo
    r["topo"] = topo.__version__
    r["topo_file"] = topo.__file__
except BaseException as e:
    r["topo_error"] = repr(e)
missing = {}
for m in MODULES:
    try:
        importlib.import_module(m)
    except BaseException as e:
        missing[m] = "%s: %s" % (type(e).__name__, e)
r["missing"] = missing
print(MARK + json.dumps(r), flush=True)
"""


def check_script(modules: list[str]) -> str:
    """The Python source each host runs (``python -c``)."""
    return f"MARK = {MARK!r}\nMODULES = {modules!r}\n" + _SCRIPT


def judge(host: HostSpec, status: int | None, out: str, err: str) -> str | None:
    """What is wrong with ``host`` from its check's output; None when it is fit."""
    line = next((x for x in out.splitlines() if x.startswith(MARK)), None)
    if line is None:
        if status == 127 or "No such file" in err or "not found" in err:
            return f"python {host.python} is not there ({_last(err) or 'not found'})"
        if status is None:
            return f"the check did not finish: {_last(err) or 'timed out'}"
        return f"python {host.python} failed (exit {status}): {_last(err) or 'no output'}"
    found = json.loads(line[len(MARK) :])
    problems = []
    mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
    theirs = ".".join(found["python"].split(".")[:2])
    if theirs != mine:
        problems.append(f"python {found['python']} there, {mine} here (use the same minor version)")
    if "topo_error" in found:
        problems.append(f"topo does not import: {found['topo_error']}")
    elif found.get("topo") != topo.__version__:
        problems.append(
            f"topo {found.get('topo')} there ({found.get('topo_file')}), {topo.__version__} here"
        )
    for module, why in found.get("missing", {}).items():
        problems.append(f"target module {module} does not import: {why}")
    return "; ".join(problems) or None


def missing_imports(status: int | None, out: str, err: str) -> dict[str, str] | str:
    """The target modules a host's check found not importing (module -> why), or why the
    check itself failed there (for the modules ``topo apply`` adds to a running program:
    python and topo were checked at the start)."""
    line = next((x for x in out.splitlines() if x.startswith(MARK)), None)
    if line is None:
        return f"its check did not run (exit {status}): {_last(err) or 'no output'}"
    return dict(json.loads(line[len(MARK) :]).get("missing", {}))


_HINT = (
    "install the project on that host, share its directory, or run with --ship "
    "(copies the working tree to the host's workdir)"
)


def _last(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1].strip() if lines else ""


def host_diagnostics(
    failures: Mapping[str, str], hosts: Mapping[str, HostSpec]
) -> list[Diagnostic]:
    """One error per failing host, in inventory order."""
    return [
        Diagnostic(
            f"host {name} ({hosts[name].address}) is not ready: {why}",
            hint=_HINT if "does not import" in why else None,
        )
        for name, why in failures.items()
    ]


def reachable_address(address: str, port: int = 22) -> str:
    """This machine's address on the route to ``address`` (what that host can reach)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((address, port))  # no packet is sent: only the route is looked up
        return str(probe.getsockname()[0])
    finally:
        probe.close()


def is_local_address(address: str) -> bool:
    """Whether this machine can listen on ``address``."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
    except OSError:
        return False
    return True
