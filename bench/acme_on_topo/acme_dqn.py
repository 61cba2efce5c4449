"""Acme's distributed DQN, built by Acme's own ``make_distributed_experiment``, on CartPole,
launched with ``import launchpad as lp`` -- the scratch ``launchpad`` package that is
``topo.launchpad`` (see ``bench/acme_on_topo.sh``, which prepares the environment).

    python acme_dqn.py --lp_launch_type=local_mp --num_steps=2000 --out=/tmp/x

Prints a JSON summary (learner steps and steps/s, actor steps, episode returns) read from
the CSV logs that every node writes under ``--out``.
"""

from __future__ import annotations

import csv
import datetime
import glob
import json
import os
import time
from typing import Any

import gym
import haiku as hk
import launchpad as lp
from absl import app, flags
from acme import specs, wrappers
from acme.agents.jax import dqn
from acme.agents.jax.dqn import losses
from acme.jax import experiments, utils
from acme.jax import networks as networks_lib
from acme.utils import loggers, lp_utils

STEPS = flags.DEFINE_integer("num_steps", 2000, "Actor steps before Acme's StepsLimiter stops.")
ACTORS = flags.DEFINE_integer("num_actors", 2, "Actors (local runs).")
OUT = flags.DEFINE_string("out", "/tmp/acme-run/out", "Where the nodes write their CSV logs.")
INFERENCE = flags.DEFINE_bool(
    "inference_server", False, "Actors select actions through Acme's batched inference server."
)


def env_factory(seed: int) -> Any:
    del seed
    return wrappers.SinglePrecisionWrapper(wrappers.GymWrapper(gym.make("CartPole-v1")))


def network_factory(spec: specs.EnvironmentSpec) -> dqn.DQNNetworks:
    def net(x: Any) -> Any:
        return hk.nets.MLP([64, 64, spec.actions.num_values])(x)

    hk_net = hk.without_apply_rng(hk.transform(net))
    obs = utils.add_batch_dim(utils.zeros_like(spec.observations))
    ff = networks_lib.FeedForwardNetwork(init=lambda rng: hk_net.init(rng, obs), apply=hk_net.apply)
    return dqn.DQNNetworks(policy_network=networks_lib.non_stochastic_network_to_typed(ff))


class RemotePolicyDQNBuilder(dqn.DQNBuilder):
    """Acme's DQN builder, except that an actor whose policy is a call to Acme's inference
    server does not jit it: Acme's DQN actor jits its policy, and jax cannot trace a
    remote call (with Launchpad's courier no more than with topo)."""

    def make_actor(
        self,
        random_key: Any,
        policy: Any,
        environment_spec: Any,
        variable_source: Any = None,
        adder: Any = None,
    ) -> Any:
        from acme.agents.jax import actors
        from acme.jax import variable_utils

        if not isinstance(variable_source, variable_utils.ReferenceVariableSource):
            return super().make_actor(random_key, policy, environment_spec, variable_source, adder)
        client = variable_utils.VariableClient(variable_source, "", device="cpu")
        return actors.GenericActor(policy, random_key, client, adder, jit=False)


def make_logger(out: str) -> Any:
    def factory(label: str, steps_key: str | None = None, instance: int = 0) -> Any:
        return loggers.Dispatcher(
            [
                loggers.TerminalLogger(label=label.capitalize(), time_delta=5.0),
                loggers.CSVLogger(out, label=f"{label}_{instance}", add_uid=False),
            ]
        )

    return factory


def build_experiment_config() -> experiments.ExperimentConfig:
    config = dqn.DQNConfig(
        discount=0.99,
        learning_rate=1e-3,
        n_step=1,
        epsilon=0.1,
        target_update_period=100,
        min_replay_size=100,
        max_replay_size=10_000,
        samples_per_insert=2,
        batch_size=32,
    )
    loss = losses.QLearning(discount=0.99, max_abs_reward=1.0)
    return experiments.ExperimentConfig(
        builder=(RemotePolicyDQNBuilder if INFERENCE.value else dqn.DQNBuilder)(
            config, loss_fn=loss
        ),
        environment_factory=env_factory,
        network_factory=network_factory,
        logger_factory=make_logger(OUT.value),
        seed=0,
        max_num_actor_steps=STEPS.value,
        checkpointing=experiments.CheckpointingConfig(
            directory=os.path.join(OUT.value, "checkpoints"), add_uid=False
        ),
    )


def _rows(out: str, label: str) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for path in sorted(glob.glob(os.path.join(out, "logs", f"{label}_*", "logs.csv"))):
        with open(path) as f:
            rows.extend(csv.DictReader(f))
    return rows


def summary(out: str, seconds: float) -> dict[str, Any]:
    """What the nodes' CSV logs say: learner steps and rate, actor steps, returns."""
    learner = _rows(out, "learner")
    actors = _rows(out, "actor")
    evaluator = _rows(out, "evaluator")
    last = learner[-1] if learner else {}
    steps = float(last.get("learner_steps", 0) or 0)
    walltime = float(last.get("learner_walltime", 0) or 0)
    returns = [float(r["episode_return"]) for r in actors if r.get("episode_return")]
    evals = [float(r["episode_return"]) for r in evaluator if r.get("episode_return")]
    return {
        "wall_s": round(seconds, 1),
        "learner_steps": int(steps),
        "learner_steps_per_s": round(steps / walltime, 1) if walltime else None,
        "actor_steps": max((int(float(r.get("actor_steps", 0))) for r in actors), default=0),
        "actor_episodes": len(returns),
        "first_10_returns": round(sum(returns[:10]) / max(len(returns[:10]), 1), 1),
        "last_10_returns": round(sum(returns[-10:]) / max(len(returns[-10:]), 1), 1),
        "evaluator_last_10_returns": round(sum(evals[-10:]) / max(len(evals[-10:]), 1), 1),
    }


def main(_: Any) -> None:
    num_actors = ACTORS.value if lp_utils.is_local_run() else 4
    server = None
    if INFERENCE.value:
        from acme.jax import inference_server

        server = inference_server.InferenceServerConfig(
            batch_size=num_actors, update_period=1, timeout=datetime.timedelta(milliseconds=50)
        )
    program = experiments.make_distributed_experiment(
        experiment=build_experiment_config(),
        num_actors=num_actors,
        inference_server_config=server,
    )
    started = time.monotonic()
    launched = lp.launch(program, xm_resources=lp_utils.make_xm_docker_resources(program))
    launched.wait()
    print("SUMMARY " + json.dumps(summary(OUT.value, time.monotonic() - started)), flush=True)


if __name__ == "__main__":
    app.run(main)
