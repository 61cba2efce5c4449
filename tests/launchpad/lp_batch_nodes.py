"""A node shaped like Acme's inference server: its handler, reached through a property,
is batched in ``__init__`` with ``pad_batch=True`` and takes a namedtuple reference to
the parameters besides the (stacked) observations."""

from __future__ import annotations

import datetime
from typing import Any, NamedTuple

import numpy as np

import topo.launchpad as lp


class ParamsRef(NamedTuple):
    """Which parameters to use (Acme's VariableReference)."""

    name: str


class Out(NamedTuple):
    value: Any


class PaddedServer:
    """Records each batch's size and how the reference arrived."""

    def __init__(self, batch_size: int) -> None:
        self.sizes: list[int] = []
        self.refs: list[tuple[str, list[str]]] = []
        batching = lp.batched_handler(
            batch_size=batch_size, timeout=datetime.timedelta(milliseconds=300), pad_batch=True
        )
        self._handler = batching(self._compute)

    @property
    def handler(self) -> Any:
        return self._handler

    def _compute(self, ref: ParamsRef, x: Any) -> Out:
        self.refs.append((type(ref).__name__, list(ref.name)))
        self.sizes.append(len(x))
        return Out(value=np.asarray(x) * 10)

    def seen(self) -> tuple[list[int], list[tuple[str, list[str]]]]:
        return self.sizes, self.refs
