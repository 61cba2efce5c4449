"""Child-process entry: join a program and run one test node."""

from __future__ import annotations

import json
import sys

import rt_nodes

from topo.runtime import RegistryInfo, connect_program, run_node, set_process_program
from topo.runtime.pool import ends_after_close


def main() -> None:
    spec = json.loads(sys.argv[1])
    ends_after_close()  # the process ends when its node does
    program = connect_program(RegistryInfo(**spec["info"]))
    set_process_program(program)
    obj = getattr(rt_nodes, spec["cls"])()
    run_node(
        obj,
        spec["node_id"],
        spec.get("group", ""),
        spec.get("replica", 0),
        program=program,
        threads=spec.get("threads", 4),
        max_message_bytes=spec.get("max_bytes", 1 << 30),
    )


if __name__ == "__main__":
    main()
