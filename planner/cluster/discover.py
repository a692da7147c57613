"""Discovery payload, shipped to the cluster as a file and run with the node's python3 (stdlib only):
records the node list (sinfo) and the GPUs this job sees (nvidia-smi; none on a node without GPUs)."""

import hashlib
import json
import shutil
import socket
import subprocess


def _run(argv: "list[str]") -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False).stdout  # noqa: S603  (fixed argv)
    except (OSError, subprocess.TimeoutExpired):
        return ""


def main() -> None:
    nodes = []
    for line in _run(["sinfo", "-h", "-N", "-o", "%N|%P|%c|%m|%G|%t"]).splitlines():
        name, partition, cpus, memory, gres, state = (line.split("|") + [""] * 6)[:6]
        nodes.append(
            {
                "name": name,
                "partition": partition.rstrip("*"),
                "cpus": cpus,
                "memory_mb": memory,
                "gres": gres,
                "state": state,
            }
        )
    gpus = []
    if shutil.which("nvidia-smi"):
        for line in _run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"]).splitlines():
            name, _, memory = line.partition(",")
            if name.strip():
                gpus.append({"name": name.strip(), "memory_total": memory.strip()})
    result = json.dumps(
        {"kind": "discovery", "host": socket.gethostname(), "nodes": nodes, "gpus": gpus}, sort_keys=True
    ).encode()
    with open("result.json.tmp", "wb") as handle:
        handle.write(result)
    shutil.move("result.json.tmp", "result.json")
    with open("result.json.sha256", "w") as handle:
        handle.write(hashlib.sha256(result).hexdigest())


if __name__ == "__main__":
    main()
