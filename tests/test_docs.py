"""The README and docs/ stay true to the code: the rooms table and picture of
docs/architecture.md say what ``RULES`` in test_layering.py says and every arrow of the
picture is an import the code makes, its table of a backend's seams names every public
method and flag of ``Backend``, every relative link and image resolves, the README opens
with the two commands that work, and names every command of ``topo --help``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from test_layering import RULES, full_graph, reach, room_of

from topo.backends.base import Backend

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
EDGE = re.compile(r"^\s*(\w+)\s*->\s*(\w+)\s*(\[[^\]]*\])?\s*;", re.MULTILINE)
NODE = re.compile(r"^\s*(\w+)\s*\[label=", re.MULTILINE)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def allowed(rules: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each room -> the other rooms its rule lets it reach."""
    return {room: set(reach) - {room} for room, reach in rules.items()}


def picture_reach(dot: str) -> dict[str, set[str]]:
    """What the picture allows: a room reaches the heads of its arrows and, through a
    solid arrow, all the head reaches; a dashed arrow gives only its head."""
    solid: dict[str, set[str]] = {}
    dashed: dict[str, set[str]] = {}
    for tail, head, attrs in EDGE.findall(dot):
        (dashed if "dashed" in (attrs or "") else solid).setdefault(tail, set()).add(head)
    rooms = set(NODE.findall(dot))
    out: dict[str, set[str]] = {}

    def reach(room: str) -> set[str]:
        if room not in out:
            found = set(dashed.get(room, ()))
            for head in solid.get(room, ()):
                found |= {head} | reach(head)
            out[room] = found - {room}
        return out[room]

    return {room: reach(room) for room in rooms}


def test_the_picture_allows_exactly_what_the_rules_allow() -> None:
    dot = (DOCS / "architecture.dot").read_text(encoding="utf-8")
    assert picture_reach(dot) == allowed(RULES)


def test_a_wrong_arrow_in_the_picture_is_caught() -> None:
    """The checker itself: a dashed arrow made solid gives more than the rule allows."""
    dot = (DOCS / "architecture.dot").read_text(encoding="utf-8")
    assert "loader -> kinds [style=dashed];" in dot
    wrong = dot.replace("loader -> kinds [style=dashed];", "loader -> kinds;")
    assert "runtime" in picture_reach(wrong)["loader"]
    assert picture_reach(wrong) != allowed(RULES)


def test_the_svg_is_rendered_from_the_dot() -> None:
    dot = (DOCS / "architecture.dot").read_text(encoding="utf-8")
    svg = (DOCS / "architecture.svg").read_text(encoding="utf-8")
    titles = set(re.findall(r"<title>([^<]*)</title>", svg))
    arrows = {f"{tail}&#45;&gt;{head}" for tail, head, _ in EDGE.findall(dot)}
    assert arrows <= titles, sorted(arrows - titles)
    assert set(NODE.findall(dot)) <= titles
    assert len([t for t in titles if "&#45;&gt;" in t]) == len(arrows)
    assert "architecture.svg" in (DOCS / "architecture.md").read_text(encoding="utf-8")


def unused_arrows(dot: str, edges: dict[str, frozenset[str]]) -> list[str]:
    """The arrows of the picture that no import makes: ``tail -> head`` where no module of
    room ``tail`` reaches one of room ``head`` (directly or through other modules)."""
    reached: dict[str, set[str]] = {}
    for module in edges:
        found = {room_of(m) for m in reach(module, edges)}
        reached.setdefault(room_of(module), set()).update(found)
    return [
        f"{tail} -> {head}"
        for tail, head, _ in EDGE.findall(dot)
        if head not in reached.get(tail, set())
    ]


def test_every_arrow_of_the_picture_is_an_import_the_code_makes() -> None:
    dot = (DOCS / "architecture.dot").read_text(encoding="utf-8")
    assert unused_arrows(dot, full_graph()) == []


def test_an_arrow_no_import_makes_is_caught() -> None:
    """The checker itself: an arrow drawn where the code imports nothing is named."""
    dot = (DOCS / "architecture.dot").read_text(encoding="utf-8")
    planted = dot.replace("  ir -> vocab;\n", "  ir -> vocab;\n  vocab -> targets;\n")
    assert unused_arrows(planted, full_graph()) == ["vocab -> targets"]


def seam_names(text: str) -> list[str]:
    """The names the seams table of docs/architecture.md gives (its first column: each
    backquoted name, ``open(job, sink)`` as ``open``)."""
    section = text[text.index("### Backends") :]
    section = section[: section.index("\n### ", 1)]
    names = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            names += re.findall(r"`(\w+)", cells[0])
    return names


def seam_problems(names: list[str]) -> list[str]:
    """What the table lacks of ``Backend``'s public methods and flags, and what it names
    that the class does not have."""
    public = {n for n in dir(Backend) if not n.startswith("_")}
    missing = [f"missing: {n}" for n in sorted(public - set(names))]
    extra = [f"not in Backend: {n}" for n in sorted(set(names) - public)]
    twice = [f"twice: {n}" for n in sorted({n for n in names if names.count(n) > 1})]
    return missing + extra + twice


def test_the_seams_table_names_every_method_and_flag_of_backend() -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    assert seam_problems(seam_names(text)) == []


def test_a_seam_left_out_of_the_table_or_made_up_is_named() -> None:
    """The checker itself: a row taken out and a name the class lacks are both said."""
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `local_pids` |"))
    wrong = text.replace(row, "| `local_hosts` | made up | None |")
    assert seam_problems(seam_names(wrong)) == [
        "missing: local_pids",
        "not in Backend: local_hosts",
    ]


def room_table(text: str) -> dict[str, set[str]]:
    """The rooms table of docs/architecture.md: room -> the rooms in its last column."""
    rows: dict[str, set[str]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"`\w+`", cells[0]):
            last = cells[-1]
            rows[cells[0].strip("`")] = (
                set() if last == "nothing" else set(re.findall(r"`(\w+)`", last))
            )
    return rows


def test_the_rooms_table_says_what_the_rules_say() -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    assert room_table(text) == allowed(RULES)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)}


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(target)
    assert broken == []


def test_the_link_checker_catches_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("# Top\n\n[ok](#top) [gone](missing.md) [x](#nowhere)\n", encoding="utf-8")
    assert links(page) == ["#top", "missing.md", "#nowhere"]
    assert anchors(page) == {"top"}
    assert slug("Across hosts: `--backend ssh`") == "across-hosts---backend-ssh"


def test_the_readme_opens_with_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.search(r"```sh\n(.*?)```", readme, flags=re.DOTALL)
    assert first is not None and readme.index("```sh") < readme.index("\n## ")
    commands = [line.split("#")[0].strip() for line in first.group(1).splitlines()]
    assert commands == ["./dev run", "./dev test"]
    dev = (ROOT / "dev").read_text(encoding="utf-8")
    assert "\n  run)\n" in dev and "\n  test)\n" in dev


def test_the_readme_names_every_command() -> None:
    from topo.cli.app import app

    names = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert names
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert [n for n in names if f"topo {n}" not in readme] == []
