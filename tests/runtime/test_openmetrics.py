"""The launcher's metrics endpoint (``topo run --metrics-port``, ``metrics_port=``): a
real run's nodes, their metrics and call figures in Prometheus' text format at
``/metrics``, only for a request with the run's token, gone with the run; the text itself
(names, labels, escaping, one HELP and TYPE per family) checked apart."""

from __future__ import annotations

import json
import re
import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli.operate import topo
from tests.cli.test_top import TOPOLOGY
from topo.supervisor.openmetrics import TOKEN_FILE, exposition, metric_name
from topo.testing import wait_until


def _get(url: str, token: str | None) -> tuple[int, str]:
    asked = urllib.request.Request(url)
    if token is not None:
        asked.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(asked, timeout=30) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _sample(text: str, name: str, **labels: str) -> float | None:
    """The value of the sample ``name`` whose labels include ``labels``."""
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', line[: line.rindex("}")]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.mark.slow
def test_a_scrape_with_the_token_gets_the_nodes_metrics_and_calls(
    topo_launch: Callable[..., Any], tmp_path: Path
) -> None:
    file = tmp_path / "calls.yaml"
    file.write_text(TOPOLOGY)
    run = topo_launch(file, "procs", metrics_port=0, ready_timeout=60)
    status = json.loads((run.run_dir / "status.json").read_text())
    url = status["metrics_endpoint"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/metrics", url), url
    token_file = run.run_dir / TOKEN_FILE
    assert token_file.stat().st_mode & 0o777 == 0o600
    token = token_file.read_text().strip()

    assert _get(url, None)[0] == 401
    assert _get(url, "not-the-token")[0] == 401
    assert _get(url.replace("/metrics", "/other"), token)[0] == 404

    def scraped() -> str | None:
        code, text = _get(url, token)
        assert code == 200, text
        steps = _sample(text, "topo_metric_client_steps", node="client/1")
        served = _sample(text, "topo_calls_total", node="server", direction="served")
        return text if steps and served and served > 20 else None

    text = wait_until(scraped, 60, what="the clients' steps and the server's calls")
    assert _sample(text, "topo_run_up", program="calls") == 1
    assert _sample(text, "topo_node_up", node="server", group="server") == 1
    assert _sample(text, "topo_node_restarts_total", node="client/2") == 0
    made = _sample(text, "topo_calls_total", node="client/0", peer="server", method="echo")
    assert made is not None and made > 0
    p50 = _sample(text, "topo_call_latency_seconds", node="server", quantile="0.5")
    assert p50 is not None and 0.001 < p50 < 1.0  # each call sleeps 2 ms
    for family in ("topo_node_up", "topo_calls_total", "topo_metric_client_steps"):
        assert text.count(f"# TYPE {family} ") == 1, family
    assert run.stop(timeout=60) == 0
    host, port = url.split("/")[2].split(":")
    with pytest.raises(OSError):  # the endpoint ended with the run
        socket.create_connection((host, int(port)), timeout=5).close()


def test_a_port_in_use_is_one_clear_error_and_nothing_runs(tmp_path: Path) -> None:
    file = tmp_path / "calls.yaml"
    file.write_text(TOPOLOGY)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = topo("run", str(file), "--metrics-port", str(port), "-q", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert f"cannot serve the metrics on 127.0.0.1:{port}: Address already in use" in done.stderr
    assert "Traceback" not in done.stderr
    bad = topo("run", str(file), "--metrics-port", "70000", cwd=tmp_path)
    assert bad.returncode == 2 and "expected a port, 0 to 65535" in bad.stderr


def test_the_text_names_escapes_and_skips_what_is_not_a_number() -> None:
    summary = {
        "id": "r1",
        "program": "p",
        "state": "running",
        "nodes": [
            {
                "id": "learner",
                "group": "learner",
                "state": "running",
                "restarts": 2,
                "stalled_s": 12.0,
                "metrics": {"loss/td": 0.5, "note": "text", "bad": float("nan"), "time": 1.0},
                "rpc": {
                    "served": [{"method": 'get"x', "calls": 7, "errors": 1}],
                    "made": [],
                    "latency": {"served": {"p50_ms": 2.0, "p99_ms": 9.0}, "made": {}},
                },
            }
        ],
    }
    text = exposition(summary)
    assert metric_name("loss/td") == "topo_metric_loss_td"
    assert _sample(text, "topo_metric_loss_td", node="learner") == 0.5
    assert "topo_metric_note" not in text and "topo_metric_bad" not in text
    assert "topo_metric_time" not in text  # a stamp, not a figure
    assert _sample(text, "topo_node_stalled", node="learner") == 1
    assert _sample(text, "topo_node_restarts_total", node="learner") == 2
    assert 'method="get\\"x"' in text and _sample(text, "topo_call_errors_total") == 1
    assert _sample(text, "topo_call_latency_seconds", quantile="0.99") == 0.009
    assert text.endswith("\n") and text.count("# HELP topo_node_up ") == 1
    assert _sample(exposition({**summary, "state": "ended"}), "topo_run_up") == 0


@pytest.mark.slow
def test_topo_run_says_where_its_metrics_are(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    from tests.cli.operate import env

    file = tmp_path / "calls.yaml"
    file.write_text(TOPOLOGY)
    proc = subprocess.Popen(
        [sys.executable, "-m", "topo", "run", str(file), "--metrics-port", "0", "-q"],
        cwd=tmp_path,
        env=env(tmp_path),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stderr is not None
        said = next(line for line in proc.stderr if "metrics for Prometheus" in line)
        url, token = re.search(r"at (\S+) \(bearer token: (\S+)\)", said).groups()  # type: ignore[union-attr]
        assert _get(url, Path(token).read_text().strip())[0] == 200
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert proc.returncode == 130
