"""Cluster benchmark against the real test cluster (scripts/testcluster up first):
submit -> result time of a trivial job, against a bare `ssh true` round trip measured in the same
run; and what one poll cycle of 50 jobs costs (SSH connections opened, remote commands run).

    .venv/bin/python bench/cluster.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.cluster.base import JobSpec
from planner.cluster.slurm import SlurmSSHExecutor, SshTarget

WRITER = (
    "import hashlib,json;d=json.dumps({'ok':1}).encode();open('result.json','wb').write(d);"
    "open('result.json.sha256','w').write(hashlib.sha256(d).hexdigest())"
)


def main() -> None:
    info = json.loads(Path("/var/tmp/governance-testcluster/cluster.json").read_text())
    target = SshTarget(
        host=info["host"],
        port=info["port"],
        user=info["user"],
        key_path=info["key_path"],
        known_hosts=Path(info["known_hosts"]).read_text(),
        remote_root=info["remote_root"],
    )
    executor = SlurmSSHExecutor(target)
    commands: list[str] = []
    original = executor.run

    def counting_run(argv: list[str], timeout: int = 60) -> tuple[int, str, str]:
        commands.append(argv[0])
        return original(argv, timeout)

    executor.run = counting_run  # type: ignore[method-assign]
    rtts = []
    for _ in range(10):
        began = time.perf_counter()
        executor.run(["true"])
        rtts.append(time.perf_counter() - began)
    stamp = int(time.time())
    latencies = []
    for i in range(5):
        began = time.perf_counter()
        ref = executor.submit(
            JobSpec(
                run_id=f"bench{stamp}x{i}",
                attempt=1,
                command=("python3", "-c", WRITER),
                partition=info["partition"],
                time_limit_s=60,
            )
        )
        while executor.poll([ref])[ref].state.active:
            time.sleep(0.1)
        assert executor.fetch(ref).result_ok
        latencies.append(time.perf_counter() - began)
    refs = [
        executor.submit(
            JobSpec(
                run_id=f"bench{stamp}y{i}", attempt=1, command=("true",), partition=info["partition"], time_limit_s=60
            )
        )
        for i in range(50)
    ]
    time.sleep(2)
    opened, commands_before = SlurmSSHExecutor.connections_opened, len(commands)
    began = time.perf_counter()
    statuses = executor.poll(refs)
    cycle = time.perf_counter() - began
    rtt = statistics.median(rtts)
    submit_to_result = statistics.median(latencies)
    print(f"ssh round trip (true): {rtt * 1e3:.1f} ms")
    print(
        f"submit -> result (trivial job, median of 5): {submit_to_result:.2f} s = {submit_to_result / rtt:.0f}x one round trip"
    )
    print(
        f"poll cycle of 50 jobs: {cycle * 1e3:.0f} ms, {SlurmSSHExecutor.connections_opened - opened} new SSH connections, "
        f"{len(commands) - commands_before} remote commands ({', '.join(commands[commands_before:])}); "
        f"{SlurmSSHExecutor.connections_opened} connection(s) opened by this process in all; "
        f"states: {sorted({s.state.value for s in statuses.values()})}"
    )


if __name__ == "__main__":
    main()
