"""The DQN agent's nodes that only read the learner's parameters: the :class:`Evaluator`
(greedy policy, mean return, ``final evaluation return: X`` at the stop) and the
:class:`ModelSaver` (``.npz`` snapshots). :mod:`examples.agents.dqn` re-exports both."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

import topo
from examples.agents.common import (
    StopAware,
    Stopping,
    make_environment,
    program_stop_event,
    result_unless_stopped,
    run_episode,
)
from examples.agents.dqn_core import numpy_layers, numpy_q_values, seed_of
from examples.agents.envs import DEFAULT
from examples.agents.node_state import pause_step


class Evaluator:
    """Runs the greedy policy every ``every_s`` seconds for ``episodes`` episodes; logs and
    prints the mean return with the actor steps at that time, and once more when the
    program stops (``final evaluation return: X``). With ``stop_at_return`` set,
    ``stop_at_return_for`` evaluations in a row whose mean reaches it stop the program
    (the task is solved: the budget left is not spent, as RLlib's stop conditions do;
    more than one in a row: not a lucky evaluation, nor a policy that is about to
    fall back). The stop cuts an evaluation under way
    short after its current episode; the final one plays what fits in ``final_within_s``
    (at least one episode), well inside the stop's grace period even on a busy machine.

    Episode seeds: with ``eval_seed`` set, every evaluation plays the same held-out
    episodes (seeds ``eval_seed``, ``eval_seed + 1``, ...: comparable across evaluations
    and runs, as a benchmark wants); else they follow from the node's seed and the
    evaluations made so far. Snapshots: then :meth:`save` keeps the returns of the
    evaluations made; a restored evaluator plays the seeds the saved one would have
    played next. Pause points: between two evaluation episodes and
    between two evaluations; the wait between evaluations and the fetches of the
    learner's parameters and the counts are pausable waits."""

    def __init__(
        self,
        random_key: Any,
        variable_source: Any,
        counter: Any,
        *,
        episodes: int = 10,
        every_s: float = 10.0,
        final_within_s: float = 1.0,
        stop_at_return: float | None = None,
        stop_at_return_for: int = 1,
        env: str = DEFAULT,
        eval_seed: int | None = None,
    ) -> None:
        self._seed = seed_of(random_key)
        self._eval_seed = eval_seed
        self._source = variable_source
        self._stop = program_stop_event()
        self._counter = StopAware(counter, self._stop)  # a call cut short by the stop
        self._episodes = episodes
        self._every_s = every_s
        self._final_within_s = final_within_s
        self._stop_at_return = stop_at_return
        self._stop_at_return_for = max(1, stop_at_return_for)
        self._reached = 0  # evaluations in a row that reached stop_at_return
        self._played = 0  # episodes the last evaluation played
        self._env = make_environment(self._seed, env)
        self._logger = topo.metrics.logger("evaluator")
        self._params: Any = None
        self.returns: list[float] = []

    def evaluate(
        self, params: Any, within_s: float | None = None, stop: threading.Event | None = None
    ) -> float:
        """Mean undiscounted return of the greedy policy of ``params`` over ``episodes``
        episodes, or fewer (at least one) once ``within_s`` passed or ``stop`` is set."""
        layers = numpy_layers(params)

        def policy(observation: np.ndarray) -> int:
            return int(np.argmax(numpy_q_values(layers, observation)))

        end = None if within_s is None else time.monotonic() + within_s
        seeds = (
            self._seed + 1000 * len(self.returns) if self._eval_seed is None else self._eval_seed
        )
        results: list[float] = []
        for i in range(self._episodes):
            pause_step()
            if results and (
                (end is not None and time.monotonic() >= end) or (stop and stop.is_set())
            ):
                break
            results.append(run_episode(self._env, policy, seeds + i))
        self._played = len(results)
        return float(np.mean(results))

    def run(self) -> None:
        """Evaluate periodically until the program stops, then a last time."""
        stop = topo.stop_event()
        started = time.monotonic()
        while True:
            pause_step()
            try:
                with topo.pausable():  # waits, then calls to the learner and the counter
                    if stop.wait(self._every_s):
                        break
                    self._params = self._fetch(timeout=60.0)
                    counts = self._counter.get_counts()
            except Exception:
                if stop.is_set():  # the learner or the counter stopped first
                    break
                raise
            mean = self.evaluate(self._params, stop=stop)
            if not stop.is_set():
                self._report(mean, counts, time.monotonic() - started)
                if self._stop_at_return is not None:
                    self._reached = self._reached + 1 if mean >= self._stop_at_return else 0
                    if self._reached >= self._stop_at_return_for:
                        reason = f"stop_at_return={self._stop_at_return:g}"
                        reason = (
                            f"an evaluation reached {reason}"
                            if self._reached == 1
                            else f"{self._reached} evaluations in a row reached {reason}"
                        )
                        print(f"evaluator: {reason}: stopping the program", flush=True)
                        topo.stop(f"the evaluator: {reason}")
        self.final()

    def save(self) -> dict[str, Any]:
        """The returns of the evaluations made (they set the next episode seeds)."""
        return {"returns": list(self.returns)}

    def restore(self, state: dict[str, Any]) -> None:
        """Continue after the evaluations of a saved evaluator."""
        self.returns = [float(r) for r in state["returns"]]

    def final(self) -> float | None:
        """The last evaluation, at the stop: the newest parameters the learner still gives
        (within 0.5 s), else the last ones fetched, played for ``final_within_s``. Prints
        ``final evaluation return: X``."""
        try:
            self._params = self._fetch(timeout=0.5, final=True)
        except Exception:  # the learner went away first
            pass
        if self._params is None:
            print("final evaluation return: none (no parameters were fetched)", flush=True)
            return None
        mean = self.evaluate(self._params, within_s=self._final_within_s)
        self.returns.append(mean)
        print(f"final evaluation return: {mean:.1f} (mean of {self._played} episodes)", flush=True)
        return mean

    def _fetch(self, timeout: float, final: bool = False) -> Any:
        """The learner's parameters; given up at the stop (but for the ``final`` fetch,
        made once stopping, bounded by its short ``timeout``)."""
        future = self._source.futures.get_variables(["policy"])
        if final:
            return future.result(timeout=timeout)[0]
        return result_unless_stopped(future, self._stop, timeout)[0]

    def _report(self, mean: float, counts: dict[str, Any], elapsed: float) -> None:
        self.returns.append(mean)
        actor_steps = int(counts.get("actor_steps", 0))
        learner_steps = int(counts.get("learner_steps", 0))
        self._logger.write(
            {
                "mean_return": mean,
                "actor_steps": actor_steps,
                "learner_steps": learner_steps,
                "elapsed_s": elapsed,
            }
        )
        print(
            f"evaluator: {elapsed:6.1f}s actor_steps={actor_steps} "
            f"learner_steps={learner_steps} mean return over {self._episodes} episodes: {mean:.1f}",
            flush=True,
        )


class ModelSaver:
    """Snapshots the learner's parameters every ``every_s`` seconds and at the stop, as
    ``params_<n>.npz`` (keys ``layer/w``) in ``directory`` (relative: the node's working
    directory).

    Snapshots: :meth:`save` keeps how many files it wrote, so a resumed saver numbers
    its files on instead of writing over the first ones. Pause points: between two
    files; the wait and the fetch of the parameters are pausable waits."""

    def __init__(
        self, variable_source: Any, *, directory: str = "snapshots", every_s: float = 10.0
    ) -> None:
        self._source = variable_source
        self._stop = program_stop_event()
        self.directory = Path(directory).resolve()
        self._every_s = every_s
        self.saved: list[Path] = []

    def save_now(self, timeout: float = 60.0, final: bool = False) -> Path:
        """Fetch the parameters and write one snapshot; its path. A fetch under way when
        the program stops is given up (``Stopping``), but for the ``final`` one."""
        [params] = self._fetch(timeout, final)
        return self._write(params)

    def _fetch(self, timeout: float = 60.0, final: bool = False) -> Any:
        future = self._source.futures.get_variables(["policy"])
        if final:
            return future.result(timeout=timeout)
        return result_unless_stopped(future, self._stop, timeout)

    def _write(self, params: Any) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"params_{len(self.saved):05d}.npz"
        flat = {
            f"{layer}/{name}": np.asarray(v) for layer, p in params.items() for name, v in p.items()
        }
        np.savez(path, **flat)
        self.saved.append(path)
        return path

    def save(self) -> dict[str, Any]:
        """The files written so far (their paths)."""
        return {"saved": [str(p) for p in self.saved]}

    def restore(self, state: dict[str, Any]) -> None:
        """Number the next file after those a saved saver wrote."""
        self.saved = [Path(p) for p in state["saved"]]

    def run(self) -> None:
        """Snapshot periodically until the program stops, then once more if possible."""
        stop = topo.stop_event()
        while True:
            pause_step()
            try:
                with topo.pausable():  # a wait, then a fetch from the learner
                    if stop.wait(self._every_s):
                        break
                    [params] = self._fetch()
            except Stopping:
                break
            self._write(params)
        try:
            self.save_now(timeout=2.0, final=True)
        except Exception as exc:  # the learner went away first
            print(f"model_saver: no final snapshot ({exc!r})", flush=True)
        print(f"model_saver: {len(self.saved)} snapshot(s) in {self.directory}", flush=True)
