"""Where node targets are imported from, checked before anything starts.

Targets resolve from the current directory (as with ``python -m``) and, for a
target not importable from there, from the nearest folder above the topology
file that holds its top-level package -- so ``topo run path/to/project/x.yaml``
works from anywhere, the way docker compose resolves paths from the compose file.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

from topo.ir import Program


def _findable(module: str) -> str | None:
    """None if ``module`` can be found without running it, else why not."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        return str(exc)
    except Exception as exc:  # a parent package's __init__ raised
        return f"importing its package raised {type(exc).__name__}: {exc}"
    return None if spec is not None else f"No module named {module!r}"


def _add_path(path: str) -> None:
    if path not in sys.path:
        sys.path.insert(0, path)
        importlib.invalidate_caches()


def prepare_imports(program: Program, modules: list[str]) -> dict[str, str]:
    """Put the import roots on ``sys.path``; return module -> message for each one still
    missing."""
    _add_path(os.getcwd())
    start = Path(program.source).resolve().parent if program.source else None
    problems: dict[str, str] = {}
    for module in modules:
        if _findable(module) is None:
            continue
        top = module.split(".")[0]
        for folder in [start, *start.parents] if start else []:
            if (folder / top).is_dir() or (folder / f"{top}.py").is_file():
                _add_path(str(folder))
                # A namespace package of the same name found earlier (dm-haiku installs
                # a top-level 'examples') would hide the real one: look again.
                stale = sys.modules.get(top)
                if stale is not None and getattr(stale, "__file__", None) is None:
                    for name in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
                        del sys.modules[name]
                break
        why = _findable(module)
        if why is not None:
            problems[module] = (
                f"cannot import {module!r} ({why}); targets resolve from the current "
                f"directory ({os.getcwd()}) and the folders above the topology file: run "
                "topo from the project root or add it to PYTHONPATH"
            )
    return problems
