"""The dashboard's server without a browser: who gets in (token, cookie, host), what
the API answers from a run directory, and that the token is written nowhere."""

from __future__ import annotations

import http.client
import json
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, compile_file
from tests.ui.support import TOKEN, call, cookie, make_run_dir, serving
from topo.ir import dumps
from topo.testing import wait_until
from topo.ui.serve import UiError, check_host, open_dashboard


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return make_run_dir(tmp_path / "run")


def test_no_token_or_a_wrong_one_is_refused_everywhere(run_dir: Path) -> None:
    with serving(run_dir) as d:
        for path in ("/", "/api/run", "/api/stream", "/static/app.js", "/api/logs?node=consumer"):
            assert call(d, path)[0] == 403, path
            assert call(d, path + ("&" if "?" in path else "?") + "token=nope")[0] == 403
            assert call(d, path, headers={"Cookie": f"{d.gate.cookie_name}=nope"})[0] == 403
        # a cookie of another dashboard (another port) does not open this one
        assert call(d, "/api/run", headers={"Cookie": f"topo_ui_1={TOKEN}"})[0] == 403


def test_the_first_visit_trades_the_token_for_a_cookie(run_dir: Path) -> None:
    with serving(run_dir) as d:
        status, headers, _ = call(d, f"/?token={TOKEN}")
        assert status == 303 and headers["location"] == "/"
        assert headers["set-cookie"].startswith(f"{d.gate.cookie_name}={TOKEN};")
        assert "HttpOnly" in headers["set-cookie"] and "SameSite=Strict" in headers["set-cookie"]
        status, headers, body = call(d, "/", headers=cookie(d))
        assert status == 200 and b"/static/app.js" in body
        assert headers["x-frame-options"] == "DENY"
        assert "default-src 'self'" in headers["content-security-policy"]


def test_another_host_name_is_refused_on_loopback(run_dir: Path) -> None:
    """A name rebound to 127.0.0.1 by another site does not reach the dashboard."""
    with serving(run_dir) as d:
        port = d.server_address[1]
        evil = {**cookie(d), "Host": f"rebound.example:{port}"}
        assert call(d, "/api/run", headers=evil)[0] == 403
        assert call(d, "/api/run", headers={**cookie(d), "Host": f"localhost:{port}"})[0] == 200


def test_the_api_reads_the_run_directory(run_dir: Path) -> None:
    with serving(run_dir) as d:
        status, _, body = call(d, "/api/run", headers=cookie(d))
        run = json.loads(body)
        assert status == 200 and run["state"] == "ended" and not run["actions"]
        assert {n["id"] for n in run["nodes"]} >= {"consumer", "producer/0"}
        logs = json.loads(call(d, "/api/logs?node=producer/0&tail=2", headers=cookie(d))[2])
        shown = [line.split(" ", 1)[1] for line in logs["lines"]]
        assert shown == ["line 3 of producer 0", "line 4 of producer 0"]
        found = json.loads(
            call(d, "/api/logs?node=producer/0&search=LINE%202", headers=cookie(d))[2]
        )
        assert found["matches"] == 1 and found["lines"][0].endswith("line 2 of producer 0")
        assert call(d, "/api/logs?node=nobody", headers=cookie(d))[0] == 400
        metrics = json.loads(call(d, "/api/metrics", headers=cookie(d))[2])["files"]
        assert [r["done"] for r in metrics["consumer"]["rows"]] == [0, 1, 2]
        offset = metrics["consumer"]["offset"]
        again = json.loads(call(d, f"/api/metrics?offsets=consumer:{offset}", headers=cookie(d))[2])
        assert again["files"] == {}


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_the_graph_is_topos_drawing_with_its_members(run_dir: Path) -> None:
    with serving(run_dir) as d:
        drawing = json.loads(call(d, "/api/graph", headers=cookie(d))[2])
        assert drawing["svg"].startswith("<svg")
        assert drawing["members"]["consumer"] == ["consumer"]
        assert sorted(drawing["members"]["producer/0"]) == ["producer/0"]


def test_an_action_needs_the_token_header_and_a_confirmation(run_dir: Path) -> None:
    with serving(run_dir) as d:
        body = {"op": "stop", "confirmed": True}
        assert call(d, "/api/action", method="POST", headers=cookie(d), body=body)[0] == 403
        wrong = {**cookie(d), "X-Topo-Token": "nope"}
        assert call(d, "/api/action", method="POST", headers=wrong, body=body)[0] == 403
        right = {**cookie(d), "X-Topo-Token": TOKEN}
        status, _, reply = call(d, "/api/action", method="POST", headers=right, body={"op": "stop"})
        assert status == 400 and b"not confirmed" in reply
        status, _, reply = call(d, "/api/action", method="POST", headers=right, body=body)
        assert status == 200 and json.loads(reply) == {
            "ok": False,
            "error": "the run is ended: no action is possible",
        }


def test_the_token_is_written_nowhere(run_dir: Path) -> None:
    with serving(run_dir) as d:
        call(d, f"/?token={TOKEN}")
        call(d, f"/api/run?token={TOKEN}")
        call(d, "/api/run", headers=cookie(d))
        with socket.create_connection(("127.0.0.1", d.server_address[1]), timeout=10) as raw:
            raw.sendall(f"GET /?token={TOKEN} HTTP/1.1 junk\r\n\r\n".encode())  # malformed
            assert b"Error code: 400" in raw.recv(4000)
    log = (run_dir / "ui.log").read_text()
    assert "/api/run" in log and TOKEN not in log
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert TOKEN not in path.read_text(errors="replace"), path


def test_bad_addresses_are_one_line_errors(run_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(UiError, match="--allow-remote"):
        check_host("0.0.0.0", False)
    check_host("0.0.0.0", True)
    check_host("127.0.0.2", False)  # loopback, all of it
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(UiError, match=f"port {port} is in use"):
            open_dashboard(run_dir, "127.0.0.1", port, TOKEN)
    with pytest.raises(UiError, match="not an address of this machine"):
        open_dashboard(run_dir, "192.0.2.1", 0, TOKEN)  # TEST-NET-1: bound, never sent to
    with pytest.raises(UiError, match="not a run directory"):
        open_dashboard(tmp_path, "127.0.0.1", 0, TOKEN)


def test_beyond_loopback_any_host_name_is_let_in_with_the_token(run_dir: Path) -> None:
    with serving(run_dir, host="0.0.0.0") as d:
        other = {**cookie(d), "Host": f"dashboard.example:{d.server_address[1]}"}
        assert call(d, "/api/run", headers=other)[0] == 200
        assert call(d, "/api/run", headers={"Host": "dashboard.example"})[0] == 403


def test_the_stream_sends_the_state_then_the_events_any_kind(run_dir: Path) -> None:
    with serving(run_dir) as d:
        conn = http.client.HTTPConnection("127.0.0.1", d.server_address[1], timeout=10)
        headers = {**cookie(d), "Host": f"127.0.0.1:{d.server_address[1]}"}
        conn.request("GET", "/api/stream", headers=headers)
        reply = conn.getresponse()
        assert reply.status == 200 and reply.getheader("Content-Type") == "text/event-stream"
        messages: dict[str, object] = {}
        while len(messages) < 2:
            name = reply.fp.readline().decode().strip()
            if not name.startswith("event: "):
                continue
            data = reply.fp.readline().decode().removeprefix("data: ")
            messages[name[7:]] = json.loads(data)
        conn.close()
    status = messages["status"]
    assert isinstance(status, dict) and status["state"] == "ended"
    assert {n["id"] for n in status["nodes"]} >= {"consumer", "producer/3"}
    kinds = [e["kind"] for e in messages["events"]]  # type: ignore[union-attr]
    assert kinds == ["starting", "applied"]  # a kind the launcher may add later, as it came


def test_curves_of_other_runs_of_this_machine(run_dir: Path, tmp_path: Path) -> None:
    from topo.runs import index

    other = make_run_dir(tmp_path / "other")
    index.register("0ther1d", other, tmp_path)
    with serving(run_dir) as d:
        runs = json.loads(call(d, "/api/runs", headers=cookie(d))[2])["runs"]
        assert "0ther1d" in [r["id"] for r in runs]
        rows = json.loads(call(d, "/api/metrics?run=0ther1d", headers=cookie(d))[2])["files"]
        assert [r["done"] for r in rows["consumer"]["rows"]] == [0, 1, 2]
        assert call(d, "/api/metrics?run=nosuchrun", headers=cookie(d))[0] == 400


def test_a_browser_gone_mid_answer_leaves_no_traceback(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serving(run_dir) as d:
        for gone in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset")):
            try:
                raise gone
            except ConnectionError:
                d.handle_error(None, ("127.0.0.1", 1))
        assert capsys.readouterr().err == ""
        try:
            raise ValueError("a real fault in a handler")
        except ValueError:
            d.handle_error(None, ("127.0.0.1", 1))
        err = capsys.readouterr().err
        assert "Traceback" in err and "a real fault in a handler" in err


def test_a_request_answered_as_the_dashboard_ends_is_not_logged(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serving(run_dir) as d:
        call(d, "/api/run", headers=cookie(d))
        d.close_log()  # as at its end, while a page may still be asking
        assert call(d, "/api/run", headers=cookie(d))[0] == 200
    assert capsys.readouterr().err == ""
    assert (run_dir / "ui.log").read_text().count("GET /api/run") == 1


def _applied(run_dir: Path, producers: int, generation: int) -> None:
    """What ``topo apply`` leaves in a run directory: program.json rewritten first, then
    status.json with the new generation and the nodes the run has now."""
    program = compile_file(EXAMPLES / "consumer_producers.yaml", [f"num_producers={producers}"])
    (run_dir / "program.json").write_text(dumps(program))
    status = json.loads((run_dir / "status.json").read_text())
    kept = {n["id"]: n for n in status["nodes"]}
    status["nodes"] = [
        kept.get(n.id, {**status["nodes"][0], "id": n.id, "group": n.group}) for n in program.nodes
    ]
    status["generation"] = generation
    (run_dir / "status.json").write_text(json.dumps(status))


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_the_graph_is_drawn_from_the_runs_program_as_a_change_left_it(run_dir: Path) -> None:
    with serving(run_dir) as d:

        def producers(drawing: dict[str, Any]) -> list[str]:
            return sorted(n for ids in drawing["members"].values() for n in ids if "prod" in n)

        before = json.loads(call(d, "/api/graph", headers=cookie(d))[2])
        assert producers(before) == [f"producer/{i}" for i in range(4)]
        _applied(run_dir, 6, 1)  # topo apply -p num_producers=6, while the page is open

        def changed() -> dict[str, Any] | None:  # status.json is read again 0.05 s after
            drawing: dict[str, Any] = json.loads(call(d, "/api/graph", headers=cookie(d))[2])
            return drawing if drawing["generation"] == 1 else None

        after = wait_until(changed, 10, what="the graph of generation 1")
        assert "producer/5" in after["svg"]
        assert producers(after) == [f"producer/{i}" for i in range(6)]
        run = json.loads(call(d, "/api/run", headers=cookie(d))[2])
        assert run["run"]["generation"] == 1
        assert [g["count"] for g in run["groups"] if g["name"] == "producer"] == [6]


def test_the_stream_says_which_nodes_a_change_removed(run_dir: Path) -> None:
    with serving(run_dir) as d:
        conn = http.client.HTTPConnection("127.0.0.1", d.server_address[1], timeout=10)
        headers = {**cookie(d), "Host": f"127.0.0.1:{d.server_address[1]}"}
        conn.request("GET", "/api/stream", headers=headers)
        reply = conn.getresponse()

        def next_status() -> dict[str, Any]:
            while True:
                line = reply.fp.readline().decode().strip()
                if line == "event: status":
                    found: dict[str, Any] = json.loads(reply.fp.readline().decode()[6:])
                    return found

        assert next_status()["gone"] == []
        _applied(run_dir, 2, 1)  # topo apply -p num_producers=2
        changed = next_status()
        conn.close()
    assert changed["run"]["generation"] == 1
    assert sorted(changed["gone"]) == ["producer/2", "producer/3"]
