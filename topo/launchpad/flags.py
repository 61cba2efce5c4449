"""Launchpad's ``--lp_launch_type`` absl flag (defined when absl is installed)."""

from __future__ import annotations

import os
import sys

DEFAULT_LAUNCH_TYPE = "local_mt"

try:  # absl comes with jax and tensorflow; without it the flag is read from argv
    from absl import flags as _flags
except ImportError:  # pragma: no cover - absl is installed with topo's rl extras
    _flags = None  # type: ignore[assignment]

if _flags is not None and "lp_launch_type" not in _flags.FLAGS:
    _flags.DEFINE_string(
        "lp_launch_type",
        DEFAULT_LAUNCH_TYPE,
        "How lp.launch runs the program: local_mt, local_mp, test_mt or test_mp.",
    )


def launch_type_flag() -> str:
    """``--lp_launch_type`` (absl, parsed from argv if nobody parsed the flags yet), else
    ``TOPO_LP_LAUNCH_TYPE``, else ``local_mt``."""
    if _flags is not None:
        flags = _flags.FLAGS
        if not flags.is_parsed():
            flags(sys.argv, known_only=True)
        flag = flags["lp_launch_type"]
        if flag.present or flag.value != DEFAULT_LAUNCH_TYPE:  # given, or set by code
            return str(flag.value)
    else:  # pragma: no cover
        for i, arg in enumerate(sys.argv):
            if arg.startswith("--lp_launch_type="):
                return arg.split("=", 1)[1]
            if arg == "--lp_launch_type" and i + 1 < len(sys.argv):
                return sys.argv[i + 1]
    return os.environ.get("TOPO_LP_LAUNCH_TYPE", DEFAULT_LAUNCH_TYPE)
