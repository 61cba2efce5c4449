"""``run.json``: written and read back the same; a damaged one is an error naming the
file, the field and what it should hold, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from topo.rundir.record import (
    GitState,
    RecordError,
    make_record,
    read_record,
    record_change,
    write_record,
)


def _record(tmp_path: Path, **given: object) -> dict[str, object]:
    record = make_record(
        backend="procs",
        backend_options={"inventory": tmp_path / "hosts.yaml"},
        file=tmp_path / "agent.yaml",
        params_given=["lr=0.1"],
        params={"lr": 0.1},
        grace_s=5,  # an int where a float goes, as Python callers give it
        log_dir=Path("runs"),
        log_max_mb=None,
        log_keep=3,
        disable_run=False,
        topo_version="0.1.0",
        argv=["topo", "run", "agent.yaml"],
        git=None,
    )
    write_record(tmp_path, record)
    data = json.loads((tmp_path / "run.json").read_text())
    data.update(given)
    (tmp_path / "run.json").write_text(json.dumps(data))
    return data


def test_a_record_reads_back_as_it_was_written(tmp_path: Path) -> None:
    _record(tmp_path)
    record = read_record(tmp_path)
    assert record.backend == "procs" and record.params == {"lr": 0.1}
    assert record.grace_s == 5.0 and isinstance(record.grace_s, float)
    assert record.backend_options == {"inventory": str(tmp_path / "hosts.yaml")}
    assert record.file == str(tmp_path / "agent.yaml") and record.git is None
    _record(tmp_path, git={"root": "/p", "commit": "abc", "dirty": None}, later={"x": 1})
    assert read_record(tmp_path).git == GitState("/p", "abc", None)  # "later": passed over


def test_a_change_rewrites_the_file_and_parameters_it_runs_with(tmp_path: Path) -> None:
    _record(tmp_path)
    record_change(tmp_path, "/new.yaml", ["lr=0.2"], {"lr": 0.2}, "name: new\n")
    record = read_record(tmp_path)
    assert (record.file, record.params_given, record.params) == (
        "/new.yaml",
        ["lr=0.2"],
        {"lr": 0.2},
    )
    assert (tmp_path / "topology.yaml").read_text() == "name: new\n"


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ({"backend": 3}, "backend: expected a string, got 3"),
        ({"params_given": ["a", 1]}, "params_given: expected a list of strings"),
        ({"grace_s": "soon"}, 'grace_s: expected a number or null, got "soon"'),
        ({"log_keep": 2.5}, "log_keep: expected a whole number, got 2.5"),
        ({"disable_run": "no"}, "disable_run: expected true or false"),
        ({"git": {"root": "/p", "dirty": True}}, "git.commit: missing"),
        ({"git": [1]}, "git: expected an object or null"),
    ],
)
def test_a_damaged_record_says_which_field(tmp_path: Path, damage: dict, said: str) -> None:
    _record(tmp_path, **damage)
    with pytest.raises(RecordError) as caught:
        read_record(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path / 'run.json'} is damaged: {said}")


def test_a_record_that_is_not_one_says_so(tmp_path: Path) -> None:
    data = _record(tmp_path)
    del data["backend"]
    (tmp_path / "run.json").write_text(json.dumps(data))
    with pytest.raises(RecordError, match="is damaged: backend: missing"):
        read_record(tmp_path)
    (tmp_path / "run.json").write_text("[1, 2]")
    with pytest.raises(RecordError, match="is damaged: the file: expected an object"):
        read_record(tmp_path)
    (tmp_path / "run.json").write_text("{not json")
    with pytest.raises(RecordError, match="cannot read"):
        read_record(tmp_path)
    (tmp_path / "run.json").unlink()
    with pytest.raises(RecordError, match=r"has no run\.json"):
        read_record(tmp_path)
