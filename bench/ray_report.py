"""bench/results/ray.md from the results of ``bench/ray_bench.py``."""

from __future__ import annotations

from typing import Any

BASELINE_RPC = "topo on procs (ipc, loopback)"


def _launch_table(result: dict[str, Any]) -> list[str]:
    lines = [
        "| nodes | backend | launch → all ready | of it: launch → backend open | "
        "launcher ready | ÷ ssh | ÷ procs | stop → run ended | stop → processes gone "
        "| executables per node or host | failed runs | load avg (1 min) after |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    ips = {ip: name for name, ip in result["cluster_ips"].items()}
    ips.update({"local": "this machine"})
    for row in result["launch"]:
        for way, r in row["ways"].items():
            per = r["samples"][0]["per_node"]
            spread = (
                "—"
                if way == "procs"
                else ", ".join(
                    f"{'the local Ray' if way.startswith('ray (local') else ips.get(k, k)} {v}"
                    for k, v in sorted(per.items(), key=lambda kv: ips.get(kv[0], kv[0]))
                )
            )
            lines.append(
                f"| {row['nodes']} | {way} | {r['ready_s']:.2f} s | {r['preflight_s']:.2f} s "
                f"| {r['launcher_ready_s']:.2f} s | {_ratio(r.get('vs_ssh'))} "
                f"| {_ratio(r.get('vs_procs'))} | {r['stop_s']:.2f} s "
                f"| {r['gone_s']:.2f} s | {spread} | {len(r['failed'])} "
                f"| {row['load_avg_1m']:.1f} |"
            )
    return lines


def _ratio(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}×"


def _rpc_table(result: dict[str, Any]) -> list[str]:
    lines = [
        "| caller → echo | payload | calls | median µs | p90 µs | median vs topo on procs |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    rpc = result["rpc"]
    base = rpc[BASELINE_RPC]
    for name, per in rpc.items():
        for label, r in per.items():
            ratio = r["median_us"] / base[label]["median_us"]
            lines.append(
                f"| {name} | {label} | {r['calls']} | {r['median_us']:.0f} "
                f"| {r['p90_us']:.0f} | {ratio:.2f}× |"
            )
    return lines


def _failures(result: dict[str, Any]) -> list[str]:
    failed = [
        (row["nodes"], way, error)
        for row in result["launch"]
        for way, r in row["ways"].items()
        for error in r["failed"]
    ]
    if not failed:
        return []
    lines = ["", "Failed runs (each rerun; the medians are of the runs that got ready):", ""]
    for nodes, way, error in failed:
        lines.append(f"- {nodes} {way}: {error[:300]}")
    return lines


def _rpc_section(result: dict[str, Any]) -> list[str]:
    if not result.get("rpc"):
        return []
    return [
        "",
        f"## RPC round trip, node to node ({result['args']['rounds']} interleaved rounds)",
        "",
        "A caller node times blocking calls to an echo node (`self.echo.echo(x)`; tiny: "
        "the int 1, 1MiB: a float64 array). On Ray the caller runs on node h1 and the "
        "echo on h2 (`resources: {host_labels: [host_h1]}` / `[host_h2]`), so each call "
        "crosses the bridge over TCP + CURVE; on procs the same two nodes talk over "
        "loopback ipc. The plain Ray figure is an actor on h1 calling "
        "`ray.get(echo.echo.remote(x))` on an actor on h2. All three were up at once.",
        "",
        *_rpc_table(result),
    ]


def markdown(result: dict[str, Any]) -> str:
    """The results as bench/results/ray.md."""
    m, a = result["machine"], result["args"]
    (l0, _, _), (l1, _, _) = m["load_avg_start_end"]
    lines = [
        "# ray backend benchmark",
        "",
        f"`{result['command']}` — {m['time']}, Ray {m['ray']}, Python {m['python']}, "
        f"{m['cpus']} CPUs (shared and noisy: every Ray node, the launcher and the nodes "
        "share them).",
        "",
        "The cluster: a Ray head on the test hosts' bridge (10.213.0.1) and one worker "
        "inside each of 3 test hosts (network namespaces on this machine), 1 CPU each, "
        f"started by the bench in {result['cluster_start_s']:.1f} s (once, not in the "
        "figures below) and stopped by pid at its end.",
        "",
        f"## Launch → all ready ({a['repeats']} interleaved repeats, medians)",
        "",
        "Timed from the `topo.launch` call to every node ready. *ray (cluster up)*: "
        "`RayBackend(address=...)` joining the running cluster (the connection, `ray.init`, "
        "is in *launch → backend open*): a placement group reserves every node's "
        "resources, then one topo agent actor per Ray node forks that node's nodes from "
        "topo's fork server. *ray (local Ray per run)*: `RayBackend()`, which starts a "
        "local Ray (2 CPUs) for the run and shuts it down at its end: Ray's own start is in "
        "its figure, its shutdown in its stop. *ssh*: the 3 test hosts, an agent per host "
        "(SSH connections and the host check are in *launch → backend open*). *procs*: "
        "the fork server on this machine. *plain Ray actors, no topo*: Ray's own part, "
        "for comparison: `ray.init(address=...)` (in the second column), then N plain "
        "actors (0.001 CPU, SPREAD; a Ray worker process each), each answering one call; "
        "its stop is `ray.kill` of each. Stop is the program's stop request → `run.stop` "
        "returned (every process ended, placement released) and → every process of the "
        "run gone (checked by pid).",
        "",
        *_launch_table(result),
        *_rpc_section(result),
        *_failures(result),
        "",
        f"Load average (1 min) at start / end of the run: {l0:.1f} / {l1:.1f}.",
        "",
    ]
    return "\n".join(lines)
