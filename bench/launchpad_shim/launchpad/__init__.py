"""A ``launchpad`` package for running Launchpad's own test files against topo: ``import
launchpad as lp`` is ``topo.launchpad``, and the Launchpad module paths the tests import
(``launchpad.program``, ``launchpad.launch.test_multi_threading.launch``, ...) are built
from topo's public objects by ``lp_shim_modules``. Used by ``bench/launchpad_suite.py``.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Sequence
from typing import Any

import lp_shim_modules

import topo.launchpad as _lp


def __getattr__(name: str) -> Any:
    return getattr(_lp, name)  # the names topo.launchpad loads on first use


class _Loader(importlib.abc.Loader):
    """Builds a shim module from its entry in ``lp_shim_modules.MODULES``."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        lp_shim_modules.MODULES[module.__name__](module)


class _Finder(importlib.abc.MetaPathFinder):
    """``launchpad.*`` and ``courier.*``: shim modules, test files and examples from the
    checkout, and an ImportError naming what an unmapped module is."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        top = fullname.split(".")[0]
        if top not in ("launchpad", "courier") or fullname in ("launchpad", "courier"):
            return None
        if fullname in lp_shim_modules.MODULES:
            return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)
        checkout = os.environ.get("LAUNCHPAD_CHECKOUT")
        from_checkout = fullname.endswith("_test") or fullname.startswith("launchpad.examples")
        if checkout and from_checkout:
            base = os.path.join(checkout, *fullname.split("."))
            for file, package in ((base + ".py", False), (os.path.join(base, "__init__.py"), True)):
                if os.path.exists(file):
                    return importlib.util.spec_from_file_location(
                        fullname, file, submodule_search_locations=[base] if package else None
                    )
        for prefix, why in lp_shim_modules.UNMAPPED.items():
            if fullname == prefix or fullname.startswith(prefix + "."):
                raise ImportError(f"{fullname} is not mapped onto topo: {why}", name=fullname)
        raise ImportError(
            f"{fullname} is not mapped onto topo: Launchpad internals (no public topo "
            "object stands for this module)",
            name=fullname,
        )


if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.insert(0, _Finder())

# Launchpad's ``launchpad/__init__.py`` imports its subpackages ``launch``, ``context`` and
# ``flags`` and then binds the names it exports over them (``lp.launch`` is the function);
# the same here, so a later import of ``launchpad.launch.*`` cannot rebind ``lp.launch``.
import launchpad.context  # noqa: E402
import launchpad.flags  # noqa: E402
import launchpad.launch  # noqa: E402, F401
from topo.launchpad import *  # noqa: E402, F403 -- Launchpad's top-level names are topo's
