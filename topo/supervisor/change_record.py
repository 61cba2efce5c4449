"""The run directory's record of the changes ``topo apply`` made to a running program.

Each change is one file, ``<run_dir>/changes/<generation>.json``, rewritten atomically
at every step: when it was asked, from which file and parameters (``params_given``: the
run's ``-p`` values from this change on; ``params_change``: which were carried from the
run, given, dropped), the plan (the JSON of ``topo diff --json``) and its text, each step
as it happened (the nodes it started, restarted or stopped, and when), and the result
(``applying``, then ``applied``, ``failed`` or ``interrupted`` with the reason). ``topo
apply`` follows it to show the progress; ``read_changes`` lists a run's changes.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from topo.rundir.layout import CHANGES_DIR, change_path


class ChangeRecord:
    """One change as it is applied (see the module docstring)."""

    def __init__(
        self,
        run_dir: Path,
        generation: int,
        plan: dict[str, Any],
        plan_text: str,
        source: dict[str, Any] | None = None,
    ) -> None:
        self.path = change_path(run_dir, generation)
        self.generation = generation
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self.data: dict[str, Any] = {
            "generation": generation,
            "asked": time.time(),
            "source": source or {},
            "plan": plan,
            "plan_text": plan_text,
            "steps": [],
            "result": "applying",
            "error": "",
            "took_s": None,
        }
        self.path.parent.mkdir(mode=0o700, exist_ok=True)
        self._write()

    def step(self, kind: str, text: str, **data: Any) -> None:
        """A step done: ``kind`` (program, start, restart, stop), what it did."""
        took = round(time.monotonic() - self._started, 3)
        with self._lock:
            self.data["steps"].append({"step": kind, "text": text, "at_s": took, **data})
            self._write()

    def finish(self, result: str, error: str = "") -> None:
        """The change ended: ``applied``, ``failed`` or ``interrupted`` (``error``: why)."""
        with self._lock:
            self.data.update(
                result=result,
                error=error,
                took_s=round(time.monotonic() - self._started, 3),
            )
            self._write()

    def summary(self) -> str:
        """``change 2 applied in 1.42s: started actor/4..7; stopped actor/2``."""
        d = self.data
        did = "; ".join(s["text"] for s in d["steps"] if s["step"] != "program")
        took = f" in {d['took_s']:.2f}s" if d["took_s"] is not None else ""
        why = f" ({d['error']})" if d["error"] else ""
        return f"change {self.generation} {d['result']}{took}{why}" + (f": {did}" if did else "")

    def _write(self) -> None:
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps(self.data, indent=2, default=str) + "\n")
        os.replace(tmp, self.path)


def read_change(run_dir: Path, generation: int) -> dict[str, Any] | None:
    """Change ``generation`` of a run as recorded (None: there is none, or not yet)."""
    try:
        data = json.loads(change_path(run_dir, generation).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_changes(run_dir: Path) -> list[dict[str, Any]]:
    """Every change recorded for a run, oldest first."""
    found = []
    for path in (run_dir / CHANGES_DIR).glob("*.json"):
        if path.stem.isdigit():
            data = read_change(run_dir, int(path.stem))
            if data is not None:
                found.append(data)
    return sorted(found, key=lambda d: int(d.get("generation", 0)))
