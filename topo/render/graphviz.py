"""Running the real Graphviz ``dot`` program on DOT text (the only module that does)."""

from __future__ import annotations

import shutil
import struct
import subprocess

INSTALL_HINT = (
    "Graphviz's `dot` program is needed to write SVG or PNG and was not found on PATH. "
    "Install it with `apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` "
    "(macOS) or `conda install graphviz`; or print DOT text with `--dot` instead."
)
FORMATS = ("svg", "png")
# PNGs are bounded: cairo clips at 32,767 px a side, and a 256-actor --expand drawing
# at 96 dpi is taller than that (a 46 MB PNG, clipped). Larger drawings are scaled down.
PNG_DPI = 96
PNG_MAX_PX = 16_384


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
    args = [exe, f"-T{fmt}"]
    if fmt == "png":  # "size" only ever scales a drawing down, uniformly
        inches = PNG_MAX_PX / PNG_DPI
        args += [f"-Gdpi={PNG_DPI}", f"-Gsize={inches:g},{inches:g}"]
    try:
        done = subprocess.run(
            args,
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


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) in pixels of PNG bytes (from the IHDR chunk)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or len(data) < 24:
        raise ValueError("not a PNG")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def png_was_scaled(data: bytes) -> bool:
    """True when ``render(..., "png")`` had to shrink the drawing to ``PNG_MAX_PX``."""
    return max(png_size(data)) >= PNG_MAX_PX * 0.98
