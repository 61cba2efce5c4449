"""Load-stage errors: every one names the file, line and column, with a hint where useful."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from topo.diagnostics import TopoError
from topo.ir import Ref
from topo.loader import load_spec


def test_unknown_group_key_points_at_the_key_and_suggests(errors_of: Any) -> None:
    f = errors_of(
        """
        name: t
        nodes:
          a:
            target: m:C
            cuont: 3
        """
    )
    assert f.headline == f"{f.diagnostics[0].pos}: error: unknown key 'cuont' in group 'a'"
    assert f.where() == ("topology.yaml", 5, 5)
    assert f.hint() == "did you mean 'count'?"


def test_unknown_top_level_key_suggests_nodes(errors_of: Any) -> None:
    f = errors_of(
        """
        name: t
        nodes:
          a: {target: m:C}
        colocations: []
        """
    )
    assert "unknown key 'colocations' in the top level" in f.headline
    assert f.where() == ("topology.yaml", 4, 1)
    assert f.hint() == "did you mean 'colocation'?"


def test_unknown_nested_key_lists_allowed_keys_when_nothing_is_close(errors_of: Any) -> None:
    f = errors_of(
        """
        name: t
        nodes:
          a:
            target: m:C
            restart: {policy: never, zzz: 1}
        """
    )
    assert "unknown key 'zzz' in 'restart' of group 'a'" in f.headline
    assert f.where() == ("topology.yaml", 5, 30)
    assert "allowed keys: backoff, max_restarts, policy" in f.hint()


def test_missing_required_key(errors_of: Any) -> None:
    f = errors_of(
        """
        name: t
        params: {}
        """
    )
    assert "the top level is missing the required key 'nodes'" in f.headline
    assert f.where()[0] == "topology.yaml"


@pytest.mark.parametrize(
    ("line", "expected", "pos"),
    [
        ("count: three", "'count' of group 'a' must be an integer, got 'three'", (5, 12)),
        ("count: 2.5", "'count' of group 'a' must be an integer, got 2.5", (5, 12)),
        ("stops_program: 'yes'", "'stops_program' of group 'a' must be true or false", (5, 20)),
        ("args: [1, 2]", "'args' of group 'a' must be a mapping", (5, 11)),
        ("kind: server", "'kind' of group 'a' must be one of", (5, 11)),
        ("restart: {max_restarts: [1]}", "'restart.max_restarts' of group 'a' must be", (5, 29)),
    ],
)
def test_wrong_types(errors_of: Any, line: str, expected: str, pos: tuple[int, int]) -> None:
    f = errors_of(f"name: t\nparams: {{}}\nnodes:\n  a:\n    {line}\n    target: m:C\n")
    assert expected in f.text
    assert f.where() == ("topology.yaml", *pos)


def test_expression_type_is_checked_after_evaluation(errors_of: Any) -> None:
    f = errors_of(
        """
        name: t
        params: {n: 5}
        nodes:
          a:
            target: m:C
            count: ${n / 2}
        """
    )
    assert "'count' of group 'a' must be an integer, got 2.5" in f.headline
    assert "use // for integer division" in f.hint()
    assert f.where() == ("topology.yaml", 6, 12)


def test_count_below_zero(errors_of: Any) -> None:
    f = errors_of("name: t\nnodes:\n  a:\n    target: m:C\n    count: -1\n")
    assert "'count' of group 'a' must be ≥ 0, got -1" in f.headline
    assert f.where() == ("topology.yaml", 5, 12)


def test_count_below_zero_from_a_param(errors_of: Any) -> None:
    f = errors_of("name: t\nparams: {n: 1}\nnodes:\n  a:\n    target: m:C\n    count: ${n - 2}\n")
    assert "must be ≥ 0, got -1" in f.headline
    assert f.where() == ("topology.yaml", 6, 12)


@pytest.mark.parametrize("target", ["mC", "m:", ":C", "m:C:D", "1m:C", "m.:C", "m:C()"])
def test_target_not_module_attr(errors_of: Any, target: str) -> None:
    f = errors_of(f"name: t\nnodes:\n  a:\n    target: '{target}'\n")
    assert "'target' of group 'a' must have the form 'package.module:attribute'" in f.headline
    assert f.where() == ("topology.yaml", 4, 13)


def test_unresolvable_param_suggests_a_close_name(errors_of: Any) -> None:
    f = errors_of(
        """
        name: t
        params: {num_actors: 2}
        nodes:
          a:
            target: m:C
            count: ${num_actor}
        """
    )
    assert "unknown parameter 'num_actor' in '${num_actor}'" in f.headline
    assert "did you mean 'num_actors'?" in f.headline
    assert f.where() == ("topology.yaml", 6, 12)


def test_unresolvable_param_inside_args(errors_of: Any) -> None:
    f = errors_of(
        """
        name: t
        params: {n: 2}
        nodes:
          a:
            target: m:C
            args:
              x: "${nope + replica}"
        """
    )
    assert "unknown parameter 'nope'" in f.headline
    assert f.where() == ("topology.yaml", 7, 10)


def test_param_default_uses_a_param_declared_later(errors_of: Any) -> None:
    f = errors_of(
        """
        name: t
        params:
          a: ${b + 1}
          b: 1
        nodes:
          x: {target: m:C}
        """
    )
    assert "parameter 'a'" in f.headline and "unknown name 'b'" in f.headline
    assert f.where() == ("topology.yaml", 3, 6)


def test_per_replica_names_outside_args_are_errors(errors_of: Any) -> None:
    f = errors_of("name: t\nnodes:\n  a:\n    target: m:C\n    count: ${replica}\n")
    assert "'replica' is only available inside a group's args and overrides" in f.headline
    assert f.where() == ("topology.yaml", 5, 12)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os')", "only these functions can be called"),
        ("().__class__", "attribute access is only allowed on a name"),
        ("[x for x in [1]]", "ListComp, which expressions do not support"),
        ("lambda: 1", "Lambda, which expressions do not support"),
        ("open('/etc/passwd')", "only these functions can be called"),
        ("'a' * 10 ** 7", "builds a value longer than"),
        ("2 ** 100000", "exponent 100000 is too large"),
        ("1 +", "cannot parse expression"),
        ("n / 0", "division by zero"),
    ],
)
def test_expressions_are_safe(errors_of: Any, expression: str, message: str) -> None:
    f = errors_of(
        "name: t\nparams: {n: 1}\nnodes:\n  a:\n    target: m:C\n"
        f'    description: "${{{expression}}}"\n'
    )
    assert message in f.headline
    assert f.where() == ("topology.yaml", 6, 18)


def test_import_expression_in_args_is_an_error_not_evaluated(errors_of: Any) -> None:
    f = errors_of(
        """
        name: t
        nodes:
          a:
            target: m:C
            args: {x: "${__import__('os').system('false')}"}
        """
    )
    assert "only these functions can be called" in f.headline
    assert f.where() == ("topology.yaml", 5, 15)


def test_unterminated_interpolation(errors_of: Any) -> None:
    f = errors_of('name: t\nnodes:\n  a:\n    target: m:C\n    args: {x: "${replica"}\n')
    assert "'${' is never closed by '}'" in f.headline
    assert f.where() == ("topology.yaml", 5, 15)


def test_escaped_interpolation_is_literal(compile_text: Any) -> None:
    program = compile_text('name: t\nnodes:\n  a:\n    target: m:C\n    args: {x: "$${n}"}\n')
    assert program.node("a").args["x"] == "${n}"


def test_unquoted_reference_says_how_to_quote(errors_of: Any) -> None:
    f = errors_of("name: t\nnodes:\n  a:\n    target: m:C\n    args:\n      x: @b\n")
    assert "invalid YAML" in f.headline
    assert f.where() == ("topology.yaml", 6, 10)
    assert 'quote the reference, e.g. replay: "@replay"' in f.hint()


def test_unquoted_expression_in_flow_mapping_says_how_to_quote(errors_of: Any) -> None:
    f = errors_of("name: t\nparams: {n: 2}\nnodes:\n  a: {target: m:C, count: ${n - 1}}\n")
    assert "invalid YAML" in f.headline
    assert f.where()[:2] == ("topology.yaml", 4)
    assert 'must be quoted: write "${n - 1}"' in f.hint()


def test_tab_indentation(errors_of: Any) -> None:
    f = errors_of("name: t\nnodes:\n\ta:\n    target: m:C\n")
    assert "invalid YAML" in f.headline and "'\\t'" in f.headline
    assert f.where() == ("topology.yaml", 3, 1)


def test_duplicate_key(errors_of: Any) -> None:
    f = errors_of("name: t\nnodes:\n  a: {target: m:C}\n  a: {target: m:D}\n")
    assert "invalid YAML" in f.headline
    assert f.where()[:2] == ("topology.yaml", 4)
    assert "each key may appear once" in f.hint()


def test_yaml_tags_are_refused(errors_of: Any) -> None:
    f = errors_of(
        "name: t\nnodes:\n  a:\n    target: m:C\n    args: {x: !ref b}\n  b: {target: m:C}\n"
    )
    assert "YAML tag '!ref' is not used by topo" in f.headline
    assert f.where() == ("topology.yaml", 5, 15)


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "just a string\n"])
def test_a_file_that_is_not_a_mapping(errors_of: Any, text: str) -> None:
    f = errors_of(text)
    assert "a topology file must be a mapping" in f.headline
    assert f.where() == ("topology.yaml", 1, 1)


def test_missing_file_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    with pytest.raises(TopoError, match="no such file"):
        load_spec(tmp_path / "absent.yaml")


# --- parameters and -p overrides -----------------------------------------------------------

PARAMS = """
name: t
params:
  n: 2
  rate: 0.5
  flag: false
  label: hello
  typed: {default: null, type: int, help: "An optional int."}
nodes:
  a:
    target: m:C
    count: ${n}
    args: {rate: "${rate}", flag: "${flag}", label: "${label}", typed: "${typed}"}
"""


def test_int_param_given_abc_is_an_error(write_topo: Any) -> None:
    path = write_topo(PARAMS)
    with pytest.raises(TopoError) as info:
        load_spec(path, ["n=abc"])
    [d] = info.value.diagnostics
    assert d.message == "-p n=abc: expected int, got str 'abc'"
    assert d.hint == "the default of 'n' is 2, so its type is int"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("n=1.5", "-p n=1.5: expected int, got float"),
        ("n=true", "-p n=true: expected int, got bool"),
        ("flag=1", "-p flag=1: expected bool, got int"),
        ("typed=x", "-p typed=x: expected int, got str"),
        ("rate=[1]", "-p rate=[1]: expected float, got list"),
    ],
)
def test_override_types_are_checked(write_topo: Any, override: str, message: str) -> None:
    with pytest.raises(TopoError, match=message.replace("[", r"\[")):
        load_spec(write_topo(PARAMS), [override])


def test_overrides_of_the_right_type_apply(compile_path: Any, write_topo: Any) -> None:
    path = write_topo(PARAMS)
    program = compile_path(path, ["n=3", "rate=2", "flag=true", "label=123", "typed=7"])
    assert program.group_index["a"].count == 3
    args = program.node("a/0").args
    assert args["rate"] == 2.0 and isinstance(args["rate"], float)
    assert args["flag"] is True
    assert args["label"] == "123"  # a str param keeps the text as given
    assert args["typed"] == 7
    assert program.params["n"] == 3


def test_unknown_override_suggests_the_param(write_topo: Any) -> None:
    with pytest.raises(TopoError) as info:
        load_spec(write_topo(PARAMS), ["nn=3"])
    [d] = info.value.diagnostics
    assert "no parameter named 'nn'" in d.message
    assert d.hint == "did you mean 'n'?"


def test_override_without_equals(write_topo: Any) -> None:
    with pytest.raises(TopoError, match="expected NAME=VALUE"):
        load_spec(write_topo(PARAMS), ["n"])


def test_reserved_param_name(errors_of: Any) -> None:
    f = errors_of("name: t\nparams: {replica: 1}\nnodes:\n  a: {target: m:C}\n")
    assert "reserved for per-replica values" in f.headline
    assert f.where() == ("topology.yaml", 2, 10)


def test_unknown_param_type(errors_of: Any) -> None:
    f = errors_of(
        "name: t\nparams:\n  n: {default: 1, type: integer}\nnodes:\n  a: {target: m:C}\n"
    )
    assert "unknown type 'integer'" in f.headline
    assert f.where() == ("topology.yaml", 3, 25)


# --- extends -------------------------------------------------------------------------------


def test_extends_merges_and_overrides(compile_path: Any, write_topo: Any) -> None:
    write_topo(
        """
        name: base
        params: {n: 2}
        nodes:
          a: {target: m:A, count: "${n}"}
          b: {target: m:B, args: {x: "@a"}}
        """,
        "base.yaml",
    )
    child = write_topo(
        """
        extends: base.yaml
        name: child
        params: {n: 3}
        nodes:
          b: {args: {y: 1}}
        """,
        "child.yaml",
    )
    program = compile_path(child)
    assert program.name == "child"
    assert [n.id for n in program.nodes] == ["a/0", "a/1", "a/2", "b"]
    assert dict(program.node("b").args) == {
        "x": (Ref("a/0"), Ref("a/1"), Ref("a/2")),
        "y": 1,
    }


def test_errors_inside_the_base_point_into_the_base(compile_path: Any, write_topo: Any) -> None:
    write_topo(
        """
        name: base
        nodes:
          a:
            target: m:A
            args: {x: "@missing"}
        """,
        "sub/base.yaml",
    )
    child = write_topo("extends: sub/base.yaml\nname: child\n", "child.yaml")
    with pytest.raises(TopoError) as info:
        compile_path(child)
    [d] = info.value.diagnostics
    assert "'@missing' refers to group 'missing', which does not exist" in d.message
    assert d.pos is not None
    assert (Path(d.pos.file).name, Path(d.pos.file).parent.name) == ("base.yaml", "sub")
    assert (d.pos.line, d.pos.col) == (5, 15)


def test_unknown_key_in_base_points_into_the_base(compile_path: Any, write_topo: Any) -> None:
    write_topo("name: base\nnodes:\n  a:\n    target: m:A\n    cont: 2\n", "base.yaml")
    child = write_topo("extends: base.yaml\nname: child\nnodes:\n  b: {target: m:B}\n", "c.yaml")
    with pytest.raises(TopoError) as info:
        compile_path(child)
    [d] = info.value.diagnostics
    assert d.pos is not None and Path(d.pos.file).name == "base.yaml"
    assert (d.pos.line, d.pos.col) == (5, 5)
    assert d.hint == "did you mean 'count'?"


def test_child_error_points_into_the_child(compile_path: Any, write_topo: Any) -> None:
    write_topo("name: base\nnodes:\n  a: {target: m:A}\n", "base.yaml")
    child = write_topo("extends: base.yaml\nname: child\nnodes:\n  a: {count: x}\n", "c.yaml")
    with pytest.raises(TopoError) as info:
        compile_path(child)
    [d] = info.value.diagnostics
    assert d.pos is not None and Path(d.pos.file).name == "c.yaml"
    assert (d.pos.line, d.pos.col) == (4, 14)


def test_extends_missing_file_and_loops(compile_path: Any, write_topo: Any) -> None:
    missing = write_topo("extends: nope.yaml\nname: c\n", "m.yaml")
    with pytest.raises(TopoError, match=r"extends: no such file nope\.yaml") as info:
        compile_path(missing)
    assert str(info.value.diagnostics[0].pos).endswith("m.yaml:1:10")
    write_topo("extends: b.yaml\nname: a\n", "a.yaml")
    loop = write_topo("extends: a.yaml\nname: b\n", "b.yaml")
    with pytest.raises(TopoError, match="extends loops back"):
        compile_path(loop)


def test_enabled_with_text_around_the_expression_is_not_silently_true(errors_of: Any) -> None:
    f = errors_of("name: t\nparams: {on: false}\nnodes:\n  a: {target: m:A, enabled: '${on} x'}\n")
    assert "'enabled' of group 'a' must be true or false, got 'false x'" in f.headline
    assert f.where() == ("topology.yaml", 4, 29)
