"""What the launcher says when a Ray node's agent dies (no Ray)."""

from __future__ import annotations

from topo.backends.ray.runner import why_dead


def test_why_an_agent_died_in_a_few_words() -> None:
    died = RuntimeError(
        "The actor died unexpectedly before finishing this task.\n\tclass_name: NodeAgent\n"
        "The actor is dead because its worker process has died. Worker exit type: "
        "SYSTEM_ERROR Worker exit detail: ..."
    )
    assert why_dead(died) == "its worker process has died"
    raised = RuntimeError(
        "The actor died because of an error raised in its creation task, ray::NodeAgent:\n"
        "Traceback (most recent call last):\n  File ...\n"
        "ModuleNotFoundError: No module named 'topo'"
    )
    assert why_dead(raised) == "its constructor raised ModuleNotFoundError: No module named 'topo'"
