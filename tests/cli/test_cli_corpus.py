"""Mutation corpus: >= 1,000 broken variants of the example topologies.

Every mutation is invalid by construction; each must make ``topo validate`` exit 1
with a ``file:line:col:`` position and never a Python traceback. Mutations are
generated deterministically (seeded ``random``) and run in-process through the
typer app, the same code path as the ``topo`` command.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import typer
import typer.main
import typer.testing
from typer.testing import CliRunner

from topo.cli.app import app

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "topologies").glob("*.yaml"))
PER_EXAMPLE = 200  # x 5 examples = 1,000 mutations
POSITION = re.compile(r"^(?P<file>\S+\.yaml):(?P<line>\d+):(?P<col>\d+): error: ", re.M)

Lines = list[str]
Mutator = Callable[[Lines, random.Random], Lines | None]  # None: not applicable here

GROUP_KEYS = {
    "kind", "target", "description", "count", "enabled", "args", "overrides", "colocate",
    "restart", "resources", "rpc", "stops_program", "primary", "tables", "checkpoint", "source",
    "refresh_ms", "stale_ms",
}  # fmt: skip
GARBAGE_KEYS = ["cuont", "targt", "argz", "colocat", "restarts", "enable", "xyzzy", "Count"]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _key_lines(lines: Lines, indent: int | None = None) -> list[int]:
    """Indices of block-mapping lines ``key: ...`` (optionally at one indentation)."""
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"^( *)([A-Za-z_][\w\-]*):(\s|$)", line)
        if m and (indent is None or len(m.group(1)) == indent):
            out.append(i)
    return out


def _group_lines(lines: Lines) -> list[int]:
    """Lines of group names under ``nodes:`` (indent 2, after the ``nodes:`` line)."""
    start = lines.index("nodes:")
    out = []
    for i in range(start + 1, len(lines)):
        if lines[i] and not lines[i].startswith(" ") and not lines[i].startswith("#"):
            break
        if re.match(r"^  [A-Za-z_][\w\-]*:", lines[i]):
            out.append(i)
    return out


def _group_field_lines(lines: Lines, field: str | None = None) -> list[int]:
    """Lines of ``field:`` directly inside a group (indent 4)."""
    groups = set(_group_lines(lines))
    out = []
    current = None
    for i, line in enumerate(lines):
        if i in groups:
            current = i
        elif current is not None and _indent(line) == 4 and line.strip()[:1] not in ("", "#"):
            key = line.strip().split(":")[0]
            if field is None or key == field:
                out.append(i)
        elif current is not None and line and not line.startswith(" "):
            current = None
    return out


def _ref_lines(lines: Lines) -> list[tuple[int, re.Match[str]]]:
    out = []
    for i, line in enumerate(lines):
        for m in re.finditer(r'"@([A-Za-z_][\w\-]*)(\[\d+\])?"', line):
            out.append((i, m))
    return out


# --- mutators: each returns a genuinely invalid file (or None if it does not apply) ---------


def unknown_group_key(lines: Lines, rng: random.Random) -> Lines | None:
    candidates = _group_field_lines(lines)
    if not candidates:
        return None
    i = rng.choice(candidates)
    key = rng.choice(GARBAGE_KEYS)
    return [*lines[: i + 1], f"    {key}: 1", *lines[i + 1 :]]


def unknown_top_key(lines: Lines, rng: random.Random) -> Lines | None:
    key = rng.choice(["node", "param", "colocations", "seeds", "nodez", "Name"])
    i = rng.choice(_key_lines(lines, 0))
    return [*lines[:i], f"{key}: 1", *lines[i:]]


def rename_group_key(lines: Lines, rng: random.Random) -> Lines | None:
    candidates = _group_field_lines(lines)
    if not candidates:
        return None
    i = rng.choice(candidates)
    key = lines[i].strip().split(":")[0]
    typo = key[:-1] if len(key) > 3 and rng.random() < 0.5 else key + rng.choice("sxz_")
    if typo in GROUP_KEYS:
        typo += "x"
    out = list(lines)
    out[i] = lines[i].replace(f"{key}:", f"{typo}:", 1)
    return out


def drop_required_top(lines: Lines, rng: random.Random) -> Lines | None:
    key = rng.choice(["name", "nodes"])
    i = lines.index(f"{key}:") if f"{key}:" in lines else None
    if i is None:
        starts = [j for j in _key_lines(lines, 0) if lines[j].startswith(f"{key}:")]
        i = starts[0]
    end = i + 1
    while end < len(lines) and (lines[end].startswith(" ") or not lines[end].strip()):
        end += 1
    return lines[:i] + lines[end:]


def drop_target(lines: Lines, rng: random.Random) -> Lines | None:
    candidates = _group_field_lines(lines, "target") + _group_field_lines(lines, "tables")
    if not candidates:
        return None
    i = rng.choice(candidates)
    return lines[:i] + lines[i + 1 :]


def wrong_type(lines: Lines, rng: random.Random) -> Lines | None:
    options: list[tuple[str, list[str]]] = [
        ("count", ["three", "[1, 2]", "{a: 1}", "2.5", "-1", "true", '"4"']),
        ("target", ["3", "[a, b]", "{a: 1}", "null", "'no colon'", "'a:b:c'", "'x y:z'"]),
        ("stops_program", ["'yes'", "3", "[true]"]),
        ("args", ["[1, 2]", "3", "'text'"]),
        ("kind", ["server", "3", "[courier]"]),
        ("enabled", ["'maybe'", "[1]", "{}"]),
        ("description", ["[1]", "{a: b}", "3"]),
        ("refresh_ms", ["-5", "soon", "1.5"]),
        ("primary", ["3", "[a]"]),
    ]
    rng.shuffle(options)
    for field, bad in options:
        candidates = _group_field_lines(lines, field)
        if candidates:
            i = rng.choice(candidates)
            end = i + 1
            while end < len(lines) and _indent(lines[end]) > 4 and lines[end].strip():
                end += 1
            return [*lines[:i], f"    {field}: {rng.choice(bad)}", *lines[end:]]
    return None


def wrong_top_type(lines: Lines, rng: random.Random) -> Lines | None:
    field, bad = rng.choice(
        [("name", ["[a]", "'has space'", "3", "'-x'"]), ("seed", ["abc", "1.5", "[1]"]),
         ("stop", ["3", "{grace_s: -1}", "{grace_s: x}"]), ("colocation", ["3", "{a: 1}"]),
         ("snapshots", ["3", "{keep: 0}", "{every_s: x}", "{every_s: 0}", "{at_stop: 2}"])]
    )  # fmt: skip
    keep = [i for i in _key_lines(lines, 0) if lines[i].startswith(f"{field}:")]
    if keep:
        i = keep[0]
        end = i + 1
        while end < len(lines) and (lines[end].startswith(" ") or not lines[end].strip()):
            end += 1
        return [*lines[:i], f"{field}: {rng.choice(bad)}", *lines[end:]]
    return [*lines, f"{field}: {rng.choice(bad)}"]


def missing_group_ref(lines: Lines, rng: random.Random) -> Lines | None:
    refs = _ref_lines(lines)
    if not refs:
        return None
    i, m = rng.choice(refs)
    bad = rng.choice([m.group(1) + "x", "nosuch", m.group(1)[:-1] or "zz", m.group(1).upper()])
    out = list(lines)
    out[i] = lines[i][: m.start()] + f'"@{bad}"' + lines[i][m.end() :]
    return out


def index_out_of_range(lines: Lines, rng: random.Random) -> Lines | None:
    refs = [(i, m) for i, m in _ref_lines(lines) if not lines[i].lstrip().startswith("primary")]
    if not refs:
        return None
    i, m = rng.choice(refs)
    out = list(lines)
    out[i] = lines[i][: m.start()] + f'"@{m.group(1)}[{rng.choice([999, 10_000, 64])}]"'
    out[i] += lines[i][m.end() :]
    return out


def bad_index(lines: Lines, rng: random.Random) -> Lines | None:
    refs = _ref_lines(lines)
    if not refs:
        return None
    i, m = rng.choice(refs)
    out = list(lines)
    junk = rng.choice(["[-1]", "[x]", "[1", "[]x", " [0]", "[0]]"])
    out[i] = lines[i][: m.start()] + f'"@{m.group(1)}{junk}"' + lines[i][m.end() :]
    return out


def unquoted_ref(lines: Lines, rng: random.Random) -> Lines | None:
    refs = _ref_lines(lines)
    if not refs:
        return None
    i, m = rng.choice(refs)
    out = list(lines)
    out[i] = lines[i][: m.start()] + m.group(0).strip('"') + lines[i][m.end() :]
    return out


def unterminated_expr(lines: Lines, rng: random.Random) -> Lines | None:
    cands = [i for i, line in enumerate(lines) if "${" in line and not line.startswith("#")]
    if not cands:
        return None
    i = rng.choice(cands)
    line = lines[i]
    j = line.index("${")
    k = line.index("}", j)
    out = list(lines)
    if rng.random() < 0.5:
        out[i] = line[:k] + line[k + 1 :]
        if "{" in line[:j] or line.rstrip().endswith("}"):  # keep flow mappings closed
            return None
    else:
        out[i] = line[:j] + '"${' + line[j + 2 : k] + '"' + line[k + 1 :]
        if line[j - 1 : j] == '"':
            return None
    return out


def unknown_param(lines: Lines, rng: random.Random) -> Lines | None:
    cands = [
        (i, m)
        for i, line in enumerate(lines)
        if not line.startswith("#")
        for m in re.finditer(r"\$\{([A-Za-z_]\w*)", line)
        if m.group(1) not in ("replica", "seed", "node_id", "group", "count")
    ]
    if not cands:
        return None
    i, m = rng.choice(cands)
    out = list(lines)
    bad = rng.choice([m.group(1) + "s", m.group(1)[:-1], "nope", "undefined_param"])
    out[i] = lines[i][: m.start(1)] + bad + lines[i][m.end(1) :]
    return out


def _groups(lines: Lines) -> dict[str, tuple[int, int]]:
    """Group name -> (first, last+1) line range of its block."""
    starts = _group_lines(lines)
    out = {}
    for k, i in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        while end > i + 1 and (
            lines[end - 1].startswith("#") or not lines[end - 1].startswith(" ")
        ):
            end -= 1
        out[lines[i].strip().rstrip(":")] = (i, end)
    return out


def _always_built(lines: Lines) -> list[int]:
    """``args:`` lines of groups that always have exactly one node (no count, no enabled)."""
    out = []
    for first, end in _groups(lines).values():
        fields = {lines[j].strip().split(":")[0] for j in range(first + 1, end)}
        if "count" in fields or "enabled" in fields:
            continue
        out.extend(j for j in range(first + 1, end) if lines[j] == "    args:")
    return out


STATIC_BAD = [
    "__import__('os')", "().__class__", "1 +", "lambda: 1", "[x for x in y]", "open('f')",
    "{1: 2}", "a := 1", "exec('1')", "replica.__class__", "nope + 1",
]  # fmt: skip
EVAL_BAD = ["'a' * 10 ** 8", "2 ** 99999", "replica / 0", "[1][5]", "len(3)", "1 + 'a'"]


def bad_expression(lines: Lines, rng: random.Random) -> Lines | None:
    """A forbidden construct (caught when loading, wherever it is) or an expression that
    fails when evaluated (only put where a node is always built: args of zero-replica or
    disabled groups are never evaluated)."""
    if rng.random() < 0.5:
        cands, expr = _group_field_lines(lines, "args"), rng.choice(STATIC_BAD)
    else:
        cands, expr = _always_built(lines), rng.choice(EVAL_BAD)
    if not cands:
        return None
    i = rng.choice(cands)
    return [*lines[: i + 1], f'      bad_arg: "${{{expr}}}"', *lines[i + 1 :]]


def broken_brackets(lines: Lines, rng: random.Random) -> Lines | None:
    """Unbalance a flow collection (``[...]`` / ``{...}`` values); text after a plain
    ``${...}`` scalar is still valid YAML, so only flow values are touched."""
    cands = [
        i
        for i, line in enumerate(lines)
        if re.match(r"^\s*(- )?[\w\-]+: [\[{]", line) and line.rstrip()[-1] in "]}"
    ]
    if not cands:
        return None
    i = rng.choice(cands)
    line = lines[i].rstrip()
    out = list(lines)
    choice = rng.randrange(3)
    if choice == 0:
        out[i] = line[:-1]  # never closed
    elif choice == 1:
        out[i] = line + rng.choice(["]", "}", " ]]", "{", ", x]"])  # closed twice / junk
    else:
        out[i] = line[:-1] + ("}" if line[-1] == "]" else "]")  # wrong closer
    return out


def bad_indentation(lines: Lines, rng: random.Random) -> Lines | None:
    cands = [
        i
        for i in _key_lines(lines)
        # a sibling must follow at the same indent: a mapping's only key may sit at any
        # deeper indent and still be valid YAML
        if _indent(lines[i]) >= 4 and i + 1 < len(lines)
        and _indent(lines[i + 1]) == _indent(lines[i]) and not lines[i].rstrip().endswith(":")
    ]  # fmt: skip
    if not cands:
        return None
    i = rng.choice(cands)
    out = list(lines)
    out[i] = " " * (_indent(lines[i]) + rng.choice([1, 3])) + lines[i].lstrip()
    return out


def tab_character(lines: Lines, rng: random.Random) -> Lines | None:
    cands = [i for i, line in enumerate(lines) if line.startswith("  ")]
    i = rng.choice(cands)
    out = list(lines)
    out[i] = "\t" + lines[i][2:]
    return out


def duplicate_key(lines: Lines, rng: random.Random) -> Lines | None:
    cands = _group_field_lines(lines)
    if not cands:
        return None
    i = rng.choice(cands)
    key = lines[i].strip().split(":")[0]
    return [*lines[: i + 1], f"    {key}: null", *lines[i + 1 :]]


def negative_count(lines: Lines, rng: random.Random) -> Lines | None:
    cands = _group_field_lines(lines, "count")
    if not cands:
        return None
    i = rng.choice(cands)
    out = list(lines)
    out[i] = f"    count: {rng.choice(['-1', '-100', '${-1}', '${0 - 3}'])}"
    return out


def empty_round_robin(lines: Lines, rng: random.Random) -> Lines | None:
    cands = [i for i, line in enumerate(lines) if "round_robin:" in line]
    if not cands:
        return None
    i = rng.choice(cands)
    out = list(lines)
    out[i] = re.sub(r"round_robin: \[.*\]", "round_robin: []", lines[i])
    out = [line for line in out if "fallback:" not in line]
    return out


def two_colocation_sets(lines: Lines, rng: random.Random) -> Lines | None:
    groups = [lines[i].strip().rstrip(":") for i in _group_lines(lines)]
    singles = [g for g in groups if f"  {g}:" in lines]  # any group
    a, b = rng.sample(singles, 2)
    extra = [f'  - nodes: ["@{a}", "@{b}"]', f'  - nodes: ["@{b}", "@{a}"]']
    if "colocation:" in lines:
        i = lines.index("colocation:")
        return [*lines[: i + 1], *extra, *lines[i + 1 :]]
    return [*lines, "colocation:", *extra]


def self_reference(lines: Lines, rng: random.Random) -> Lines | None:
    """A singleton, always-enabled group holding a handle to itself."""
    cands = _always_built(lines)
    if not cands:
        return None
    i = rng.choice(cands)
    group = next(name for name, (a, b) in _groups(lines).items() if a < i < b)
    return [*lines[: i + 1], f'      me: "@{group}"', *lines[i + 1 :]]


def not_a_mapping(lines: Lines, rng: random.Random) -> Lines | None:
    return [rng.choice(["- a", "just text", "42", "[1, 2]", "null", "~"])] + (
        ["- b"] if rng.random() < 0.5 else []
    )


def yaml_tag(lines: Lines, rng: random.Random) -> Lines | None:
    refs = _ref_lines(lines)
    if not refs:
        return None
    i, m = rng.choice(refs)
    out = list(lines)
    out[i] = lines[i][: m.start()] + f"!ref {m.group(1)}" + lines[i][m.end() :]
    return out


MUTATORS: list[Mutator] = [
    unknown_group_key, unknown_top_key, rename_group_key, drop_required_top, drop_target,
    wrong_type, wrong_top_type, missing_group_ref, index_out_of_range, bad_index,
    unquoted_ref, unterminated_expr, unknown_param, bad_expression, broken_brackets,
    bad_indentation, tab_character, duplicate_key, negative_count, empty_round_robin,
    two_colocation_sets, self_reference, not_a_mapping, yaml_tag,
]  # fmt: skip


def corpus() -> list[tuple[str, str, str]]:
    """(example name, mutator name, mutated text), deterministic."""
    out = []
    for path in EXAMPLES:
        rng = random.Random(f"topo-corpus-{path.name}")
        lines = path.read_text().splitlines()
        made = 0
        attempts = 0
        while made < PER_EXAMPLE:
            attempts += 1
            assert attempts < PER_EXAMPLE * 20, f"mutators do not apply to {path.name}"
            mutator = (
                MUTATORS[made % len(MUTATORS)] if attempts <= PER_EXAMPLE else rng.choice(MUTATORS)
            )
            mutated = mutator(lines, rng)
            if mutated is None:
                continue
            out.append((path.name, mutator.__name__, "\n".join(mutated) + "\n"))
            made += 1
    return out


CORPUS = corpus()


def test_corpus_is_large_and_varied() -> None:
    assert len(CORPUS) >= 1000
    used = {m for _, m, _ in CORPUS}
    assert used == {m.__name__ for m in MUTATORS}, set(m.__name__ for m in MUTATORS) - used
    assert len({text for _, _, text in CORPUS}) > 600  # mostly distinct files


@pytest.fixture(scope="module")
def runner() -> Iterator[CliRunner]:
    """A runner that builds the click command of ``app`` once, not once per invocation
    (building it is about half the cost of a small validate)."""
    command = typer.main.get_command(app)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(typer.testing, "_get_command", lambda _app: command)
        yield CliRunner()


@pytest.mark.slow
@pytest.mark.parametrize("example", [p.name for p in EXAMPLES])
def test_every_mutation_fails_cleanly(example: str, runner: CliRunner, tmp_path: Path) -> None:
    failures: list[str] = []
    for n, (name, mutator, text) in enumerate(c for c in CORPUS if c[0] == example):
        path = tmp_path / f"{n:04d}-{mutator}-{name}"
        path.write_text(text, encoding="utf-8")
        result = runner.invoke(app, ["validate", "-q", str(path)])
        output = result.output
        problem = None
        if result.exit_code != 1:
            problem = f"exit {result.exit_code}"
            if result.exception is not None and not isinstance(result.exception, SystemExit):
                problem += f" ({type(result.exception).__name__}: {result.exception})"
        elif "Traceback" in output:
            problem = "traceback in output"
        else:
            m = POSITION.search(output)
            if m is None:
                problem = "no file:line:col: in output"
            elif Path(m["file"]).name != path.name or int(m["line"]) < 1 or int(m["col"]) < 1:
                problem = f"bad position {m.group(0)!r}"
            elif int(m["line"]) > text.count("\n") + 1:
                problem = f"line {m['line']} is past the end of the file"
        if problem:
            failures.append(f"{path.name}: {problem}\n{output.strip()[:400]}")
    assert not failures, f"{len(failures)} bad results:\n\n" + "\n\n".join(failures[:15])
