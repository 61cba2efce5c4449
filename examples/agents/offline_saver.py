"""The offline agent's model saver: the learner's policy parameters as an ``.npz`` file
(Acme's JAXSnapshotter). :mod:`examples.agents.offline` re-exports it."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

import topo
from topo.runtime import Handle

Params = Any  # a haiku parameter tree: {module: {name: array}}
STOP_DEADLINE_S = 2.0  # RPCs made while the program stops: its peers may be gone already
RPC_ERRORS = (ConnectionError, TimeoutError)  # topo's PeerUnavailable, DeadlineExceeded


def _stop_event() -> threading.Event:
    """The program's stop event; a private one outside a topo program (tests, scripts)."""
    try:
        return topo.stop_event()
    except RuntimeError:
        return threading.Event()


def _node_id(default: str) -> str:
    try:
        return topo.current_node().id
    except RuntimeError:
        return default


def _with_deadline(peer: Any, seconds: float) -> Any:
    """``peer`` with calls limited to ``seconds`` when it is a topo handle."""
    return peer.with_timeout(seconds) if isinstance(peer, Handle) else peer


def save_snapshot(params: Params, path: str | Path) -> Path:
    """Write a haiku parameter tree to ``path`` (.npz, keys ``module/name``), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flat = {
        f"{module}/{name}": np.asarray(v) for module, d in params.items() for name, v in d.items()
    }
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **flat)
    os.replace(tmp, path)
    return path


def load_snapshot(path: str | Path) -> Params:
    """The parameter tree a ``save_snapshot`` file holds."""
    params: dict[str, dict[str, np.ndarray]] = {}
    with np.load(path) as data:
        for key in data.files:
            module, _, name = key.rpartition("/")
            params.setdefault(module, {})[name] = data[key]
    return params


class ModelSaver:
    """Snapshots the learner's policy parameters to ``directory/policy.npz`` every
    ``every_s`` seconds and once more at stop (Acme's JAXSnapshotter, as .npz)."""

    def __init__(
        self, variable_source: Any, directory: str = "snapshots", every_s: float = 10.0
    ) -> None:
        self._source = _with_deadline(variable_source, STOP_DEADLINE_S)
        self._first_source = variable_source
        self._path = Path(directory) / "policy.npz"
        self._every_s = every_s
        self._stop = _stop_event()
        self.saved = 0

    def save_now(self, wait: bool = False) -> Path | None:
        """Fetch the parameters and write the snapshot; None when the learner cannot answer.
        (Not ``save``: that name is a node's snapshot state; this saver keeps none, its
        file is overwritten each time.)"""
        source = self._first_source if wait else self._source
        try:
            with topo.pausable():
                params = source.get_variables(["policy"])[0]
        except RPC_ERRORS:
            return None
        self.saved += 1
        return save_snapshot(params, self._path)

    def run(self) -> None:
        """Save every ``every_s`` seconds until the program stops, then once more."""
        self.save_now(wait=True)
        while True:
            topo.pausepoint()
            with topo.pausable():
                if self._stop.wait(self._every_s):
                    break
            self.save_now()
        self.save_now()  # the learner may be gone already (procs): then the last one stands
        node = _node_id("model_saver")
        print(f"{node}: {self.saved} snapshots, the last in {self._path}", flush=True)
