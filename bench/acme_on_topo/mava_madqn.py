"""Mava 0.1.3's MADQN (TF, on Acme 0.4.0) on its simple_spread debugging environment,
built by Mava's own ``MADQN(...).build()`` and launched with ``import launchpad as lp``
-- the scratch ``launchpad`` package that is ``topo.launchpad`` (see
``bench/acme_on_topo.sh``). Mava's variable server stops the program (``lp.stop()``)
once the trainer made ``--trainer_steps`` steps.

    python mava_madqn.py --lp_launch_type=local_mp --trainer_steps=200
"""

from __future__ import annotations

import functools
import json
import time
from typing import Any

import launchpad as lp
import sonnet as snt
from absl import app, flags
from mava.components.tf.modules.exploration.exploration_scheduling import (
    LinearExplorationTimestepScheduler,
)
from mava.systems.tf import madqn
from mava.utils import lp_utils
from mava.utils.environments import debugging_utils

STEPS = flags.DEFINE_integer("trainer_steps", 200, "Trainer steps before the program stops.")
EXECUTORS = flags.DEFINE_integer("num_executors", 2, "Executors.")


def main(_: Any) -> None:
    environment_factory = functools.partial(
        debugging_utils.make_environment, env_name="simple_spread", action_space="discrete"
    )
    network_factory = lp_utils.partial_kwargs(
        madqn.make_default_networks, value_networks_layer_sizes=(64, 64)
    )
    program = madqn.MADQN(
        environment_factory=environment_factory,
        network_factory=network_factory,
        num_executors=EXECUTORS.value,
        batch_size=32,
        min_replay_size=32,
        max_replay_size=1000,
        optimizer=snt.optimizers.Adam(learning_rate=1e-3),
        checkpoint=False,
        exploration_scheduler_fn=LinearExplorationTimestepScheduler(
            epsilon_start=1.0, epsilon_min=0.05, epsilon_decay_steps=500
        ),
        termination_condition={"trainer_steps": STEPS.value},
    ).build()
    # Mava's own GPU placement: a PythonProcess for each label, [] for the trainer
    local_resources = lp_utils.to_device(
        program_nodes=program.groups.keys(), nodes_on_gpu=["trainer"]
    )
    started = time.monotonic()
    launched = lp.launch(program, terminal="current_terminal", local_resources=local_resources)
    launched.wait()
    seconds = round(time.monotonic() - started, 1)
    print("SUMMARY " + json.dumps({"wall_s": seconds, "trainer_steps": STEPS.value}), flush=True)


if __name__ == "__main__":
    app.run(main)
