"""absl in Launchpad nodes: flags are parsed (their defaults, plus the label's
``PythonProcess(args=...)`` on processes), ``--lp_launch_type`` is the program's launch
type, and ``logging.info`` shows in the node's output, as under Launchpad's process entry;
``lp.launch(..., launch_type=...)`` in a script that never parsed its command line reads
the flags it knows, as Launchpad's does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lp_absl_nodes import FlagReader
from lp_support import Launch, run_script

import topo.launchpad as lp
from topo.launchpad.node_process import command_line
from topo.launchpad.nodes.python.local_multi_processing import PythonProcess


def _program() -> tuple[lp.Program, lp.CourierNode]:
    program = lp.Program("flags")
    node = lp.CourierNode(FlagReader)
    program.add_node(node, label="reader")
    return program, node


@pytest.mark.parametrize("launch_type", ["test_mp"])
def test_node_processes_parse_absl_flags_and_log_info(lp_launch: Launch) -> None:
    program, node = _program()
    args = {"lp_test_greeting": "hello", "lp_test_loud": False}
    launched = lp_launch(program, local_resources={"reader": PythonProcess(args=args)})
    read = node.create_handle().dereference().flags()
    assert read == {"lp_launch_type": "test_mp", "greeting": "hello", "loud": False}
    text = (Path(launched.run.run_dir) / "logs" / "reader.log").read_text()
    line = next(x for x in text.splitlines() if "flag reader built with" in x)
    absl_info = r"(^| )I\d{4} [\d:.]+ +\d+ \S+:\d+\] "  # absl's INFO prefix
    assert re.search(absl_info + "flag reader built with greeting hello$", line)


def test_thread_nodes_read_the_launchers_flags(lp_launch: Launch, launch_type: str) -> None:
    program, node = _program()
    lp_launch(program)
    read = node.create_handle().dereference().flags()
    if launch_type == "test_mt":  # the launcher's flags: pytest gave none of these
        assert read["greeting"] == "hi" and read["loud"] is True
    else:
        assert read == {"lp_launch_type": "test_mp", "greeting": "hi", "loud": True}


SCRIPT = """
    import topo.launchpad as lp
    from lp_absl_nodes import FlagReader

    program = lp.Program("flags")
    node = program.add_node(lp.CourierNode(FlagReader), label="reader")
    launched = lp.launch(program, launch_type="test_mt")
    print("read", sorted(node.dereference().flags().items()))
    launched.stop()
"""


def test_a_script_that_never_parsed_its_flags_gets_them_read(tmp_path: Path) -> None:
    """Launchpad's launch parses the flags it knows when nobody did; others are left."""
    result = run_script(tmp_path, SCRIPT, "--lp_test_greeting=yo", "--not_a_flag=1", "extra")
    assert result.returncode == 0, result.stderr
    assert "read [('greeting', 'yo'), ('loud', True), ('lp_launch_type', 'local_mt')]" in (
        result.stdout
    )


def test_python_process_args_are_written_as_launchpad_writes_them() -> None:
    assert command_line({"a": 1, "b": "x y", "on": True, "off": False}) == [
        "--a=1",
        "--b=x y",
        "--on",
        "--nooff",
    ]
    assert command_line(["--a", "1"]) == ["--a", "1"]
    assert command_line(None) == []
