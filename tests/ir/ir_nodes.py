"""Node code and argument objects for the IR tests (importable in the fork server)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def triple(x: int) -> int:
    """A module-level function: the IR carries it as an import path."""
    return 3 * x


@dataclass(frozen=True)
class EnvSpec:
    """An environment spec object: not importable by name, so the IR pickles it."""

    name: str
    max_steps: int


class Applier:
    """A served node built with callables and an object from the IR."""

    def __init__(
        self, fn: Callable[[int], int], post: Callable[[int], int], spec: EnvSpec, tag: str = ""
    ) -> None:
        self.fn, self.post, self.spec, self.tag = fn, post, spec, tag

    def apply(self, x: int) -> int:
        return self.post(self.fn(x))

    def describe(self) -> dict[str, Any]:
        return {
            "spec": (self.spec.name, self.spec.max_steps),
            "tag": self.tag,
            "fn": f"{self.fn.__module__}:{self.fn.__qualname__}",
            "pid": os.getpid(),
        }
