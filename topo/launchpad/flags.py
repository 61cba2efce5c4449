"""Launchpad's ``--lp_launch_type`` absl flag (defined when absl is installed), and the
command line of a script nobody parsed: read as absl's ``app.run`` reads it (``--help``,
an unknown flag or a launch type topo does not run end the script with a message)."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

DEFAULT_LAUNCH_TYPE = "local_mt"
LAUNCH_TYPES = ("local_mt", "local_mp", "test_mt", "test_mp")
# Launchpad's other launch types: valid there, not run by topo
NOT_ON_TOPO = ("local_docker", "vertex_ai")
_HELP = ("--help", "-help", "-h", "--helpshort", "-?")

try:  # absl comes with jax and tensorflow; without it the flag is read from argv
    from absl import flags as _flags
    from absl import logging as _absl_logging  # noqa: F401 -- its flags (--v, ...), as in Launchpad
except ImportError:  # pragma: no cover - absl is installed with topo's rl extras
    _flags = None  # type: ignore[assignment]

if _flags is not None and "lp_launch_type" not in _flags.FLAGS:
    _flags.DEFINE_enum(
        "lp_launch_type",
        DEFAULT_LAUNCH_TYPE,
        list(LAUNCH_TYPES),
        "How lp.launch runs the program: on threads (local_mt, test_mt) or processes "
        "(local_mp, test_mp) of this machine; test_* launches are stopped by the test.",
    )
    # Launchpad's other flags: accepted so its scripts' command lines parse; topo
    # ignores them (its stop grace period and terminal output are its own)
    _IGNORED = "Launchpad's flag, accepted and ignored by topo."
    if "lp_termination_notice_secs" not in _flags.FLAGS:
        _flags.DEFINE_integer("lp_termination_notice_secs", 10, _IGNORED)
    if "lp_worker_manager_v2" not in _flags.FLAGS:
        _flags.DEFINE_bool("lp_worker_manager_v2", False, _IGNORED)
    if "tmux_open_window" not in _flags.FLAGS:
        _flags.DEFINE_string("tmux_open_window", None, _IGNORED)
    if "tmux_session_name" not in _flags.FLAGS:
        _flags.DEFINE_string("tmux_session_name", "launchpad", _IGNORED)
    # topo's own: the same unchanged script on another backend (e.g. across SSH hosts).
    _flags.DEFINE_string(
        "topo_backend", None, "Run on this topo backend (procs, threads, ssh, ray) instead."
    )
    _flags.DEFINE_string("topo_hosts", None, "With --topo_backend=ssh: the hosts inventory.")


def backend_flags() -> tuple[str | None, dict[str, str]]:
    """``--topo_backend`` and ``--topo_hosts`` (after ``launch_type_flag`` parsed the
    command line): the backend to run on instead of the launch type's, and its options."""
    if _flags is None or not _flags.FLAGS.is_parsed():
        return None, {}
    backend = _flags.FLAGS["topo_backend"].value
    hosts = _flags.FLAGS["topo_hosts"].value
    return backend, ({"hosts": hosts} if hosts else {})


def launch_type_flag() -> str:
    """``--lp_launch_type`` (absl; the command line is parsed if nobody parsed it yet),
    else ``TOPO_LP_LAUNCH_TYPE``, else ``local_mt``."""
    if _flags is not None:
        flags = _flags.FLAGS
        if not flags.is_parsed():
            parse_command_line(sys.argv)
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


def read_flags() -> None:
    """As Launchpad's ``launch`` does: a script that never parsed its command line (it
    passed ``launch_type=``) gets the absl flags it knows read from it, so code reading
    ``FLAGS.x`` in the launcher or in thread nodes works; other arguments are left."""
    if _flags is not None and not _flags.FLAGS.is_parsed():
        _flags.FLAGS(sys.argv, known_only=True)


def parse_command_line(argv: list[str]) -> None:
    """Parse ``argv`` into absl's flags as ``app.run`` would: ``--help`` prints the
    script's flags and exits 0; a flag absl does not know, or a bad value, exits 1 with
    absl's message. Under a test runner or a notebook (whose own options are no absl
    flags) only the flags absl knows are read, the rest is left alone."""
    assert _flags is not None
    flags = _flags.FLAGS
    if _foreign_command_line():
        flags(argv, known_only=True)
        return
    args = argv[1 : argv.index("--")] if "--" in argv else argv[1:]
    if any(arg in _HELP for arg in args):
        print(_short_help(argv[0]))
        sys.exit(0)
    if "--helpfull" in args:
        print(flags.get_help())
        sys.exit(0)
    try:
        flags(argv)
    except _flags.Error as exc:
        _flags_error(str(exc), argv)


def _foreign_command_line() -> bool:
    """The command line is a test runner's or a notebook kernel's, not the script's."""
    main = sys.modules.get("__main__")
    if main is None or not getattr(main, "__file__", None):
        return True  # interactive, python -c
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name.split(".")[0] == "unittest":
        return True
    return any(name in sys.modules for name in ("_pytest", "ipykernel"))


def _short_help(program: str) -> str:
    """What ``--help`` prints: the script's docstring and flags, then topo's flag."""
    assert _flags is not None
    flags = _flags.FLAGS
    name = os.path.basename(program) or "script"
    parts = [f"usage: {name} [--lp_launch_type={'|'.join(LAUNCH_TYPES)}] [flags]"]
    doc = getattr(sys.modules.get("__main__"), "__doc__", None)
    if doc:
        parts.append(doc.strip())
    own = flags.main_module_help().strip()
    if own:
        parts.append(own)
    parts.append(flags.module_help(__name__).strip())
    parts.append("Try --helpfull to get a list of all flags.")
    return "\n\n".join(parts)


def _flags_error(message: str, argv: list[str]) -> NoReturn:
    """End the script as absl does on a bad command line: its message, exit status 1."""
    lines = [f"FATAL Flags parsing error: {message}"]
    if "--lp_launch_type" in message:
        given = [a.split("=", 1)[1] for a in argv if a.startswith("--lp_launch_type=")]
        other = [v for v in given if v in NOT_ON_TOPO]
        lines.append(
            (f"{other[0]} is a Launchpad launch type that topo does not run. " if other else "")
            + f"topo runs programs on this machine ({', '.join(LAUNCH_TYPES)}), and on "
            "other machines with lp.launch(..., backend='ssh' or 'ray')"
        )
    elif "Unknown command line flag" in message:
        lines.append(
            "(lp.launch reads the command line as absl's app.run does: a script with flags "
            "of its own defines them with absl, or passes launch_type= to lp.launch)"
        )
    lines.append("Pass --help or --helpfull to see help on flags.")
    print("\n".join(lines), file=sys.stderr)
    sys.exit(1)
