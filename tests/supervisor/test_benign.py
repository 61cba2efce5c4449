"""Reverb's benign INFO lines are recognised (kept off the console); its errors are not."""

from __future__ import annotations

import pytest

from topo.supervisor.benign import is_benign

PID = "(1844)"


@pytest.mark.parametrize(
    "line",
    [
        f"[reverb/cc/client.cc:165] Sampler and server are owned by the same process {PID} so "
        "Table priority_table is accessed directly without gRPC.",
        "[reverb/cc/platform/tfrecord_checkpointer.cc:162]  Initializing TFRecordCheckpointer "
        "in /tmp/topo-reverb-unused-c201f5a1.",
        "[reverb/cc/platform/tfrecord_checkpointer.cc:565] Loading latest checkpoint from /tmp/x",
        "[reverb/cc/platform/default/server.cc:71] Started replay server on port 38461",
        "[reverb/cc/platform/default/server.cc:84] Shutting down replay server",
    ],
)
def test_reverb_info_lines_are_benign(line: str) -> None:
    assert is_benign(line)


@pytest.mark.parametrize(
    "line",
    [
        "[reverb/cc/writer.cc:391] Unable to confirm that items were written.",
        "[reverb/cc/writer.cc:395] Error when stopping the confirmation worker: DATA_LOSS: ...",
        "learner: stopped after 2233 learner steps",
        "print('[reverb/cc/client.cc:165] Sampler and server are owned') in user code",
    ],
)
def test_errors_and_other_lines_are_not(line: str) -> None:
    assert not is_benign(line)
