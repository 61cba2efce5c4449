"""``PythonProcess``: Launchpad's per-label process settings for local launches."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PythonProcess:
    """How the processes of one label start: ``env`` is added to their environment and
    ``args`` (``{"flag": value}`` or a list) are parsed as absl flags there.

    ``interpreter`` must be left unset: topo forks every node from its own pre-warmed
    interpreter."""

    args: Mapping[str, object] | Sequence[str] | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    interpreter: str | None = None

    def __post_init__(self) -> None:
        if self.interpreter is not None:
            raise ValueError(
                "PythonProcess(interpreter=...) is not supported by topo: every node runs in "
                "the interpreter topo runs in (set env= for per-label environment variables)"
            )
