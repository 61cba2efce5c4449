"""The job a program asks Slurm for (``topo.backends.slurm.request``, ``script``,
``partition``), on a cluster described by ``scontrol``'s own text: colocation, spread,
CPUs/GPUs/memory, heterogeneous components, and each refusal with Slurm's limit and the
group's ``file:line:col``. Pure: no Slurm runs here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CompileText, WriteTopo, compile_file
from topo.backends.slurm.options import SlurmOptions
from topo.backends.slurm.partition import (
    fields,
    gpus_in,
    memory_mib,
    parse_cluster,
    show_time,
    time_s,
)
from topo.backends.slurm.plan import launcher, plan_text, request_for
from topo.backends.slurm.request import Request
from topo.backends.slurm.script import render
from topo.diagnostics import TopoError
from topo.ir import Program

# `scontrol show partition -o` and `scontrol show node -o` of a small cluster, as Slurm
# 22.05 writes them (values with spaces: OS, Reason)
DATA = Path(__file__).parent / "data"
PARTITIONS = (DATA / "scontrol-partitions.txt").read_text()
NODES = (DATA / "scontrol-nodes.txt").read_text()
CLUSTER = parse_cluster(PARTITIONS, NODES)


def request(program: Program, **options: object) -> Request:
    return request_for(program, SlurmOptions.of(**options), CLUSTER)


def refusal(program: Program, **options: object) -> str:
    """The one diagnostic the request is refused with, as ``file:line:col: error: ...``."""
    with pytest.raises(TopoError) as info:
        request(program, **options)
    assert len(info.value.diagnostics) == 1, str(info.value)
    return info.value.diagnostics[0].headline()


def position(path: Path, text: str) -> str:
    """``file:line:col`` of the first line of ``path`` that starts (after spaces) with
    ``text``."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip().startswith(text):
            return f"{path}:{number}:{len(line) - len(line.lstrip()) + 1}"
    raise AssertionError(f"{text!r} not in {path}")


def sbatch_lines(script: str) -> list[str]:
    return [
        line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH")
    ]


# -- Slurm's text -------------------------------------------------------------------------


def test_scontrol_records_are_read_with_values_that_hold_spaces() -> None:
    record = fields(NODES.splitlines()[1])
    assert record["OS"] == "Linux 6.1.0 #1 SMP"
    assert record["Reason"] == "disk full [root@2026-12-06T17:00:00]"
    assert record["RealMemory"] == "16000" and record["NodeName"] == "c2"
    c1, _, g1 = CLUSTER.partition("all").nodes
    assert (c1.name, c1.cpus, c1.memory_mib, c1.gpus, c1.features) == (
        "c1",
        8,
        16000,
        0,
        ("ib", "skylake"),
    )
    assert g1.gpus == 2 and g1.features == ()
    tiny = CLUSTER.partition("tiny")
    assert (tiny.max_nodes, tiny.max_time_s, tiny.max_cpus_per_node) == (1, 600, 2)
    assert tiny.max_mem_per_node_mib == 1000 and [n.name for n in tiny.nodes] == ["c1"]
    assert CLUSTER.partition(None).name == "cpu"  # the default one


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 1800),
        ("5:30", 330),
        ("01:02:03", 3723),
        ("2-0", 172800),
        ("1-02:03", 93780),
        ("1-00:00:10", 86410),
        ("UNLIMITED", None),
        ("INFINITE", None),
    ],
)
def test_slurm_times_read_as_sbatch_reads_them(text: str, seconds: int | None) -> None:
    assert time_s(text) == seconds


def test_unreadable_times_and_slurm_amounts() -> None:
    for bad in ("1h", "1:2:3:4", "-5", "a-1"):
        with pytest.raises(ValueError):
            time_s(bad)
    assert show_time(93780) == "1-02:03:00" and show_time(60) == "00:01:00"
    assert gpus_in("gpu:a100:2(S:0-1),gpu:v100:1,mps:100") == 3
    assert gpus_in("(null)") == 0 and gpus_in(None) == 0
    assert memory_mib("4G") == 4096 and memory_mib("1000") == 1000
    assert memory_mib("UNLIMITED") is None


# -- the request ------------------------------------------------------------------------


def test_processes_without_resources_ask_one_cpu_each_on_as_few_nodes_as_hold_them(
    compile_text: CompileText,
) -> None:
    program = compile_text(
        """
        name: p
        nodes:
          worker: {target: "topo.testing.nodes:Ticker", count: 11}
        """
    )
    job = request(program)
    # 11 one-CPU processes on 8-CPU nodes: two nodes, balanced, asked for alike
    assert [len(n.exes) for n in job.nodes] == [6, 5]
    assert len(job.components) == 1
    comp = job.components[0]
    assert (comp.nodes, comp.cpus, comp.gpus, comp.memory_mib) == (2, 6, 0, 0)


def test_resources_become_cpus_per_task_gres_and_mem(compile_text: CompileText) -> None:
    program = compile_text(
        """
        name: p
        nodes:
          learner:
            target: "topo.testing.nodes:Ticker"
            resources: {cpus: [0, 1, 2], gpus: [0], memory: 3GiB}
          actor:
            target: "topo.testing.nodes:Ticker"
            count: 2
            colocate: {per_process: 2}
            resources: {memory: 512MiB}
        """
    )
    script = render(program, request(program, partition="gpu"), ["topo", "run"])
    lines = sbatch_lines(script)
    # one node: 3 + 1 CPUs, the learner's GPU, 3 GiB + 512 MiB
    assert lines[-6:] == [
        "--partition=gpu",
        "--nodes=1",
        "--ntasks-per-node=1",
        "--cpus-per-task=4",
        "--gres=gpu:1",
        "--mem=3584M",
    ]


def test_a_host_set_shares_a_node_and_a_spread_group_takes_one_node_each(
    compile_text: CompileText,
) -> None:
    program = compile_text(
        """
        name: p
        nodes:
          a: {target: "topo.testing.nodes:Ticker", resources: {cpus: [0, 1, 2, 3, 4]}}
          b: {target: "topo.testing.nodes:Ticker", resources: {cpus: [0, 1, 2]}}
          s: {target: "topo.testing.nodes:Ticker", count: 2, resources: {spread: true}}
        colocation:
          - {nodes: ["@a", "@b"], mode: host}
        """
    )
    job = request(program, partition="all")
    where = {exe: i for i, node in enumerate(job.nodes) for exe in node.exes}
    assert where["a"] == where["b"]  # 8 CPUs together, on one node
    assert where["s/0"] != where["s/1"]
    assert len(job.nodes) == 3


def test_nodes_that_differ_in_gpus_make_a_heterogeneous_job(compile_text: CompileText) -> None:
    program = compile_text(
        """
        name: p
        nodes:
          learner:
            target: "topo.testing.nodes:Ticker"
            resources: {cpus: [0, 1, 2, 3, 4, 5], gpus: [0, 1]}
          actor: {target: "topo.testing.nodes:Ticker", count: 10}
        """
    )
    job = request(program, partition="all", time="2:00:00", account="rl")
    assert job.heterogeneous
    script = render(program, job, ["python", "-m", "topo", "run", "f.yaml"])
    lines = sbatch_lines(script)
    assert lines.count("hetjob") == 1
    first, second = "\n".join(lines).split("hetjob")
    # the GPU node first (the batch shell runs there); every component names the time
    # and account (a component does not inherit them)
    assert "--gres=gpu:2" in first and "--gres" not in second
    assert "--cpus-per-task=8" in first  # the learner's 6 and 2 actors
    for part in (first, second):
        assert "--time=2:00:00" in part and "--account=rl" in part
    assert "--nodes=1" in second and "--cpus-per-task=8" in second
    assert script.splitlines()[-1] == "exec python -m topo run f.yaml"


def test_the_script_warns_the_batch_shell_requeues_and_execs_the_launcher(
    compile_text: CompileText,
) -> None:
    program = compile_text(
        """
        name: my-run
        nodes:
          worker: {target: "topo.testing.nodes:Ticker", resources: {host_labels: [ib]}}
        """
    )
    job = request(program, warning_s=300, constraint="skylake", sbatch_args="--mail-type=END")
    script = render(
        program, job, ["topo", "run", "a b.yaml"], output="/r/slurm-%j.out", workdir="/w"
    )
    assert script.startswith("#!/bin/bash\n")
    lines = sbatch_lines(script)
    assert lines[:6] == [
        "--job-name=topo-my-run",
        "--signal=B:USR1@300",
        "--requeue",
        "--open-mode=append",
        "--output=/r/slurm-%j.out",
        "--mail-type=END",
    ]
    assert "--constraint=(skylake)&ib" in lines  # the option's and the group's features
    body = script.split("\n\n", 1)[1].splitlines()
    assert body == ["cd /w || exit 1", "trap '' USR1", "exec topo run 'a b.yaml'"]


def test_the_launcher_is_topo_run_with_the_warning_and_every_parameter(
    write_topo: WriteTopo,
) -> None:
    path = write_topo(
        """
        name: p
        params:
          n: 2
          tag: base
        nodes:
          worker: {target: "topo.testing.nodes:Ticker", count: "${n}"}
        """
    )
    program = compile_file(path, ["n=3"])
    argv = launcher(program, SlurmOptions.of(partition="cpu", warning_s=60))
    assert argv[1:] == [
        "-m",
        "topo",
        "run",
        str(path),
        "-b",
        "slurm",
        "--warning-s",
        "60",
        "-p",
        "n=3",
        "-p",
        "tag=base",
    ]
    job = request(program)
    exec_line = render(program, job, ["python", *argv[1:]]).split("\n\n", 1)[1]
    assert exec_line.splitlines() == [
        "trap '' USR1",
        f"exec python -m topo run {path} -b slurm --warning-s 60 \\",
        "    -p n=3 \\",
        "    -p tag=base",
    ]


# -- refusals ------------------------------------------------------------------------------

SPREAD = """
name: p
nodes:
  head: {target: "topo.testing.nodes:Ticker"}
  s:
    target: "topo.testing.nodes:Ticker"
    count: 3
    resources: {spread: true}
"""


def test_an_unknown_partition_is_refused_naming_those_there_are(compile_text: CompileText) -> None:
    program = compile_text(SPREAD)
    with pytest.raises(TopoError) as info:
        request(program, partition="cpus")
    (found,) = info.value.diagnostics
    assert found.message == (
        "--partition cpus: Slurm has no such partition (partitions: cpu*, gpu, all, tiny)"
    )
    assert found.hint == "did you mean 'cpu'?"


def test_more_nodes_than_maxnodes_or_the_partition_has(
    write_topo: WriteTopo,
) -> None:
    path = write_topo(SPREAD)
    program = compile_file(path)
    where = position(path, "s:")
    assert refusal(program, partition="tiny") == (
        f"{where}: error: the job needs 3 nodes (group 's' sets resources.spread), and "
        "partition 'tiny' allows at most 1 (MaxNodes=1)"
    )
    assert refusal(program, partition="cpu") == (
        f"{where}: error: the job needs 3 nodes (group 's' sets resources.spread), and "
        "partition 'cpu' has 2 (c1, c2)"
    )


def test_cpus_memory_and_gpus_over_a_nodes_are_refused_with_the_limit(
    write_topo: WriteTopo,
) -> None:
    path = write_topo(
        """
        name: p
        nodes:
          small: {target: "topo.testing.nodes:Ticker"}
          big:
            target: "topo.testing.nodes:Ticker"
            resources: {cpus: [0, 1, 2], memory: 2GB}
        """
    )
    where = position(path, "big:")
    assert refusal(compile_file(path), partition="tiny") == (
        f"{where}: error: a process of group 'big' needs 3 CPUs on one node, and partition "
        "'tiny' gives at most 2 (MaxCPUsPerNode=2); and 1908 MiB of memory on one node, and "
        "partition 'tiny' gives at most 1000 MiB (MaxMemPerNode=1000M)"
    )
    gpus = write_topo(
        """
        name: p
        nodes:
          learner: {target: "topo.testing.nodes:Ticker", resources: {gpus: [0, 1, 2]}}
        """,
        "gpus.yaml",
    )
    learner = position(gpus, "learner:")
    assert refusal(compile_file(gpus)) == (
        f"{learner}: error: a process of group 'learner' needs 3 GPUs on one node, and "
        "partition 'cpu' has no node with GPUs (no Gres=gpu)"
    )
    assert refusal(compile_file(gpus), partition="gpu") == (
        f"{learner}: error: a process of group 'learner' needs 3 GPUs on one node, and "
        "partition 'gpu' has at most 2 on a node (g1: Gres=gpu:2)"
    )


def test_a_feature_no_node_has_and_more_cpus_than_the_partition(write_topo: WriteTopo) -> None:
    path = write_topo(
        """
        name: p
        nodes:
          fast: {target: "topo.testing.nodes:Ticker", resources: {host_labels: [nvlink]}}
          many: {target: "topo.testing.nodes:Ticker", count: 17}
        """
    )
    with pytest.raises(TopoError) as info:
        request(compile_file(path))
    (found,) = info.value.diagnostics
    assert found.headline() == (
        f"{position(path, 'fast:')}: error: a process of group 'fast' needs a node with the "
        "feature(s) nvlink, and no node of partition 'cpu' has them"
    )
    many = write_topo(
        """
        name: p
        nodes:
          many: {target: "topo.testing.nodes:Ticker", count: 17}
        """,
        "many.yaml",
    )
    assert refusal(compile_file(many)) == (
        f"{position(many, 'many:')}: error: the job's 17 processes ask for 17 CPUs in all "
        "(one each without resources.cpus), and partition 'cpu' has 16 (c1: 8, c2: 8)"
    )


def test_time_limits_are_refused_against_maxtime_and_the_warning(
    compile_text: CompileText,
) -> None:
    program = compile_text(SPREAD.replace("count: 3", "count: 1"))
    assert refusal(program, partition="tiny", time="20") == (
        "error: --time 20 (00:20:00) is over partition 'tiny''s MaxTime=00:10:00"
    )
    assert refusal(program, time="1h") == "error: --time 1h: not a Slurm time limit"
    assert refusal(program, time="2", warning_s=120) == (
        "error: --warning-s 120: the warning must come before the job's end, and its time "
        "limit is 00:02:00 (--time 2)"
    )
    assert refusal(program, partition="tiny", warning_s=600) == (
        "error: --warning-s 600: the warning must come before the job's end, and its time "
        "limit is 00:10:00 (partition 'tiny''s MaxTime)"
    )
    assert request(program, time="2", warning_s=60).options.time == "2"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            "--nodes=4",
            "--sbatch-args --nodes=4: topo sets --nodes itself (topo sizes the job from the plan)",
        ),
        ("-pmain", "--sbatch-args -pmain: topo sets -p itself (give --partition)"),
        (
            "--mail-type END",
            "--sbatch-args: 'END' is not an sbatch option (each word is one, as --NAME=VALUE)",
        ),
        ("--comment='x", '--sbatch-args "--comment=\'x": cannot read it (No closing quotation)'),
    ],
)
def test_sbatch_args_that_topo_writes_itself_or_cannot_read(
    compile_text: CompileText, args: str, said: str
) -> None:
    program = compile_text(SPREAD.replace("count: 3", "count: 1"))
    assert refusal(program, sbatch_args=args) == f"error: {said}"


def test_without_slurm_the_plan_says_so(
    compile_text: CompileText, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = compile_text(SPREAD)
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(TopoError) as info:
        plan_text(program)
    assert str(info.value) == (
        "error: Slurm is not installed here: no sbatch or scontrol on PATH (the slurm "
        "backend submits with sbatch and reads the partition with scontrol)"
    )
