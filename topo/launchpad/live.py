"""Objects handed to thread nodes as they are (``serialize_py_nodes=False`` on
``local_mt``/``test_mt``): each is kept here under a name, and the program carries the
import path ``topo.launchpad.live:<name>``, which gives the object back in this process.

Launchpad runs thread nodes with the very objects the program was built with (a
``threading.Event`` the test waits on, a list the node fills); this is how topo does the
same without pickling. Only meaningful in the launcher's process: the threads backend.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable
from typing import Any

_objects: dict[str, Any] = {}
_ids = itertools.count()
_lock = threading.Lock()


def keep(obj: Any) -> str:
    """Keep ``obj`` until :func:`release`; the import path that gives it back."""
    with _lock:
        name = f"obj_{next(_ids)}"
        _objects[name] = obj
    return f"{__name__}:{name}"


def release(paths: Iterable[str]) -> None:
    """Forget the objects of ``paths`` (once the program that used them has ended)."""
    with _lock:
        for path in paths:
            _objects.pop(path.rpartition(":")[2], None)


def __getattr__(name: str) -> Any:
    with _lock:
        if name in _objects:
            return _objects[name]
    raise AttributeError(
        f"no live object {name!r} in this process: objects passed with "
        "serialize_py_nodes=False reach thread nodes only (local_mt, test_mt)"
    )
