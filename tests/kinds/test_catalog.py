"""The registry reads one table, the ``topo.kinds`` entry points: topo's own kinds are
declared there like a plug-in's, listed first, and an install without them still works
and says to reinstall."""

from __future__ import annotations

import tomllib
import warnings
from importlib.metadata import EntryPoint, distributions, entry_points
from pathlib import Path

import pytest

from topo.kinds import ENTRY_POINT_GROUP, NodeKind, kind_names
from topo.kinds import builtin as builtin_module
from topo.kinds.catalog import REINSTALL, load_entry_points

ROOT = Path(__file__).resolve().parents[2]
BUILTIN = ["courier", "py", "reverb", "cacher"]
HERE = Path(__file__).resolve().parent


def _eps(site: Path) -> list[EntryPoint]:
    """The ``topo.kinds`` entry points of the distributions installed in ``site``."""
    return [
        ep for d in distributions(path=[str(site)]) for ep in d.entry_points
        if ep.group == ENTRY_POINT_GROUP
    ]  # fmt: skip


def _dist(site: Path, name: str, entry_points_txt: str) -> None:
    dist = site / f"{name.replace('-', '_')}-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(entry_points_txt)


def test_pyproject_declares_every_builtin_kind_and_the_install_has_them() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    table = declared[ENTRY_POINT_GROUP]
    defined = {
        name: value for name, value in vars(builtin_module).items() if isinstance(value, NodeKind)
    }
    assert {f"topo.kinds.builtin:{name}" for name in defined} == set(table.values())
    assert {value.name for value in defined.values()} == set(table)
    installed = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert {k: installed.get(k) for k in table} == table, "run ./dev setup to reinstall"
    assert kind_names()[:4] == BUILTIN


def test_topos_own_kinds_come_first_in_the_order_they_are_defined(tmp_path: Path) -> None:
    # The metadata lists entry points by name; a plug-in's distribution may come first.
    _dist(tmp_path, "a-plugin", "[topo.kinds]\ngreeter = kind_plugin:GREETER\n")
    _dist(tmp_path, "topo-launch", "[topo.kinds]\n" + "".join(
        f"{n} = topo.kinds.builtin:{n.upper()}\n" for n in sorted(BUILTIN)
    ))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kinds = load_entry_points(_eps(tmp_path))
    assert list(kinds) == [*BUILTIN, "greeter"]


def test_an_install_without_topos_entry_points_still_has_the_builtin_kinds(
    tmp_path: Path,
) -> None:
    _dist(tmp_path, "a-plugin", "[topo.kinds]\ngreeter = kind_plugin:GREETER\n")
    with pytest.warns(UserWarning, match="Reinstall topo") as caught:
        kinds = load_entry_points(_eps(tmp_path))
    assert list(kinds) == [*BUILTIN, "greeter"]
    assert [str(w.message) for w in caught] == [REINSTALL]


def test_a_broken_entry_point_is_skipped_with_a_warning(tmp_path: Path) -> None:
    _dist(tmp_path, "topo-launch", "[topo.kinds]\ncourier = topo.kinds.builtin:COURIER\n")
    _dist(
        tmp_path,
        "broken",
        "[topo.kinds]\nnope = kind_plugin:NOPE\nnot_a_kind = kind_plugin:greet\n",
    )
    with pytest.warns(UserWarning) as caught:
        kinds = load_entry_points(_eps(tmp_path))
    assert list(kinds) == ["courier"]
    messages = [str(w.message) for w in caught]
    assert any("'nope' (kind_plugin:NOPE) failed to load: AttributeError" in m for m in messages)
    assert any("'not_a_kind' (kind_plugin:greet) is a function, not a" in m for m in messages)
