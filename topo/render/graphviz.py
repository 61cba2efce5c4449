"""Running the real Graphviz ``dot`` program on DOT text (the only module that does)."""

from __future__ import annotations

import shutil
import subprocess

INSTALL_HINT = (
    "Graphviz's `dot` program is needed to write SVG or PNG and was not found on PATH. "
    "Install it with `apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` "
    "(macOS) or `conda install graphviz`; or print DOT text with `--dot` instead."
)
FORMATS = ("svg", "png")


class GraphvizError(RuntimeError):
    """``dot`` is missing or failed; the message says what to do."""


def find_dot() -> str | None:
    """Path of the ``dot`` executable, or None."""
    return shutil.which("dot")


def render(dot_text: str, fmt: str, *, timeout_s: float = 120.0) -> bytes:
    """``dot -T<fmt>`` over ``dot_text``: the SVG or PNG bytes."""
    if fmt not in FORMATS:
        raise ValueError(f"unsupported Graphviz output format {fmt!r}; use one of {FORMATS}")
    exe = find_dot()
    if exe is None:
        raise GraphvizError(INSTALL_HINT)
    try:
        done = subprocess.run(
            [exe, f"-T{fmt}"],
            input=dot_text.encode("utf-8"),
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise GraphvizError(
            f"`dot` took longer than {timeout_s:.0f} s; try without --expand"
        ) from exc
    except OSError as exc:
        raise GraphvizError(f"could not run {exe}: {exc}") from exc
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", "replace").strip()
        raise GraphvizError(f"`dot -T{fmt}` failed (exit {done.returncode}): {err}")
    return done.stdout
