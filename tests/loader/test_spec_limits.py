"""Odd but harmless YAML (merge keys, tags, odd extends names) and the documented limits:
each ends in a ``file:line:col`` error or loads; none raises a Python exception."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from topo.diagnostics import TopoError
from topo.loader import load_spec

GROUP = "name: t\nnodes:\n  a:\n    target: m.x:Y\n"


def test_merge_keys_are_resolved_and_keep_positions(write_topo: Any, errors_of: Any) -> None:
    text = """\
        name: t
        nodes:
          a: &base
            target: m.x:Y
            count: 2
          b:
            <<: *base
            count: 3
        """
    spec = load_spec(write_topo(text)).spec
    assert (spec.nodes["b"].target, spec.nodes["b"].count) == ("m.x:Y", 3)
    failure = errors_of(text.replace("count: 2", "count: -1").replace("count: 3\n", ""))
    # both groups are wrong, and b's error points at the line it took the value from
    assert {failure.where(i) for i in range(2)} == {("topology.yaml", 5, 12)}


@pytest.mark.parametrize(
    ("value", "tag"),
    [
        ("!!omap [{a: 1}]", "!!omap"),
        ("!!python/object:os.system {a: 1}", "!!python/object:os.system"),
        ("!!python/tuple [1, 2]", "!!python/tuple"),
        ("!!set {a, b}", ""),
        ("!!binary aGk=", "!!binary"),
    ],
)
def test_tags_are_refused_at_their_line(value: str, tag: str, errors_of: Any) -> None:
    failure = errors_of(GROUP + f"    args: {{x: 1}}\n    overrides: {value}\n")
    assert failure.where()[1] == 6
    assert "tag" in failure.headline and tag in failure.headline


@pytest.mark.parametrize(
    ("base", "message"),
    [
        ('"\\0"', "cannot use '\\x00' as a file name (embedded null byte)"),
        ('"' + "a" * 5000 + '"', "File name too long"),
        ('""', "is a directory"),
        ("/dev/null", "/dev/null is not a regular file"),
    ],
)
def test_unusable_extends_names(base: str, message: str, errors_of: Any) -> None:
    failure = errors_of(f"extends: {base}\n" + GROUP)
    assert message in failure.error.args[0]
    assert failure.where() == ("topology.yaml", 1, 10)


def test_yaml_nesting_is_bounded(errors_of: Any) -> None:
    deep_flow = errors_of(GROUP + "    args: {x: " + "[" * 150 + "]" * 150 + "}\n")
    assert "nested more than 100 levels" in deep_flow.headline
    block = "".join(" " * (6 + 2 * i) + f"k{i}:\n" for i in range(400))
    deep_block = errors_of(GROUP + "    args:\n" + block)
    assert "nested too deeply" in deep_block.headline


def test_non_utf8_byte_is_located(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_bytes(GROUP.encode() + b"    args: {x: \xff}\n")
    with pytest.raises(TopoError) as info:
        load_spec(path)
    pos = info.value.diagnostics[0].pos
    assert pos is not None and (pos.line, pos.col) == (5, 15)


def test_node_limit_can_be_raised_with_topo_max_nodes(
    write_topo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    one_group = write_topo(GROUP + "    count: 150\n", "one.yaml")
    two_groups = write_topo(
        GROUP + "    count: 60\n  b:\n    target: m.x:Y\n    count: 60\n", "two.yaml"
    )
    monkeypatch.setenv("TOPO_MAX_NODES", "100")
    with pytest.raises(TopoError) as info:
        load_spec(one_group)
    d = info.value.diagnostics[0]
    assert "group 'a' has 150 nodes, more than the limit of 100" in d.message
    assert d.pos is not None and d.pos.line == 5 and "TOPO_MAX_NODES=150" in (d.hint or "")
    with pytest.raises(TopoError, match="the program has 120 nodes"):
        load_spec(two_groups)
    monkeypatch.setenv("TOPO_MAX_NODES", "200")
    assert load_spec(one_group).spec.nodes["a"].count == 150
    monkeypatch.setenv("TOPO_MAX_NODES", "lots")
    with pytest.raises(TopoError, match="not a positive whole number"):
        load_spec(one_group)


def test_disabled_groups_do_not_count_towards_the_limit(
    write_topo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOPO_MAX_NODES", "100")
    path = write_topo(GROUP + "    count: 1000\n    enabled: false\n")
    assert load_spec(path).spec.nodes["a"].enabled is False


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("[[0]*1000]*1000", "builds a value longer than 1,000,000"),
        ("[[[0]*1000]*999, [[0]*1000]*999]", "builds a value longer than 1,000,000"),
        ("len(str([[1]*100]*100))", None),
        ("2**4096 * 2**4096", None),
        ("(3**4096)**2", "integer of more than 10,000 bits"),
        ("2**4000 * 2**4000 * 2**4000", "integer of more than 10,000 bits"),
        ("round(1, -1001)", "at most 1000 digits"),
        ("round(123, -1)", None),
        ("'%s' % 1", "formatting of strings is not supported"),
        ("7 % 3", None),
    ],
)
def test_expression_sizes_are_bounded_inside_nested_values(
    expr: str, message: str | None, write_topo: Any
) -> None:
    path = write_topo(f'name: t\ndescription: "v=${{{expr}}}"\nnodes:\n  a: {{target: m.x:Y}}\n')
    if message is None:
        load_spec(path)
        return
    with pytest.raises(TopoError, match=message) as info:
        load_spec(path)
    pos = info.value.diagnostics[0].pos
    assert pos is not None and pos.line == 2


def test_alias_bomb_in_a_param_override_is_refused(write_topo: Any) -> None:
    levels = ["&l0 [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    levels += [f"&l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 8)]
    path = write_topo("name: t\nparams: {x: []}\nnodes:\n  a: {target: m.x:Y}\n")
    with pytest.raises(TopoError, match=r"-p x: cannot read .* expands to more than 50,000"):
        load_spec(path, [f"x=[{', '.join(levels)}]"])
