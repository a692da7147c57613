"""Inspection benchmark (issue 42; not bench/inspect.py: run as a script it would shadow the standard library's inspect): wall time, CPU time and peak memory of the node's inspection of a
generated 4-shard, 1 GiB BF16 checkpoint and of the committed tiny model, headers only (every check
but the manifest) and in full (the manifest hashes every byte), each in a fresh process.

    .venv/bin/python bench/inspection.py [--gib 1] [--dense] [--repeat 3]

The shards' headers are real safetensors headers (a Llama-like model, 2048 hidden, 5504 intermediate,
as many layers as fill the size); their data regions are sparse unless --dense writes random bytes.
Peak memory: ru_maxrss of the child (the interpreter included: a bare import is printed for
comparison) and tracemalloc's peak of Python allocations during one inspection.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HIDDEN, INTERMEDIATE, VOCAB = 2048, 5504, 32_000
SHAPES = {
    "self_attn.q_proj.weight": (HIDDEN, HIDDEN),
    "self_attn.k_proj.weight": (HIDDEN, HIDDEN),
    "self_attn.v_proj.weight": (HIDDEN, HIDDEN),
    "self_attn.o_proj.weight": (HIDDEN, HIDDEN),
    "mlp.gate_proj.weight": (INTERMEDIATE, HIDDEN),
    "mlp.up_proj.weight": (INTERMEDIATE, HIDDEN),
    "mlp.down_proj.weight": (HIDDEN, INTERMEDIATE),
    "input_layernorm.weight": (HIDDEN,),
    "post_attention_layernorm.weight": (HIDDEN,),
}


def _size(shape: tuple[int, ...]) -> int:
    count = 2
    for dim in shape:
        count *= dim
    return count


def generate(root: Path, total_bytes: int, shards: int, dense: bool) -> None:
    per_layer = sum(_size(s) for s in SHAPES.values())
    layers = max(1, (total_bytes - 2 * _size((VOCAB, HIDDEN))) // per_layer)
    tensors: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (VOCAB, HIDDEN),
        "lm_head.weight": (VOCAB, HIDDEN),
    }
    tensors["model.norm.weight"] = (HIDDEN,)
    for layer in range(layers):
        tensors.update({f"model.layers.{layer}.{name}": shape for name, shape in SHAPES.items()})
    names = sorted(tensors)
    weight_map = {}
    for index in range(shards):
        shard = f"model-{index + 1:05d}-of-{shards:05d}.safetensors"
        header: dict[str, object] = {"__metadata__": {"format": "pt"}}
        offset = 0
        for name in names[index::shards]:
            size = _size(tensors[name])
            header[name] = {"dtype": "BF16", "shape": list(tensors[name]), "data_offsets": [offset, offset + size]}
            offset += size
            weight_map[name] = shard
        body = json.dumps(header).encode()
        with (root / shard).open("wb") as handle:
            handle.write(struct.pack("<Q", len(body)) + body)
            if dense:
                for _ in range(offset // (1 << 24)):
                    handle.write(os.urandom(1 << 24))
                handle.write(os.urandom(offset % (1 << 24)))
            else:
                handle.truncate(8 + len(body) + offset)
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "torch_dtype": "bfloat16",
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": layers,
        "num_attention_heads": 16,
        "vocab_size": VOCAB,
    }
    (root / "config.json").write_text(json.dumps(config))
    (root / "README.md").write_text("---\nlicense: apache-2.0\nbase_model: org/base\n---\n# Bench\n")
    apache = Path("/usr/share/common-licenses/Apache-2.0")
    (root / "LICENSE").write_text(apache.read_text() if apache.exists() else "Apache License 2.0\n")


def child(directory: str, mode: str) -> None:
    from planner.inspectjob import inspect_checkpoint

    hash_files = mode == "full"
    if mode == "import":
        print(json.dumps({"maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
        return
    began, cpu = time.perf_counter(), time.process_time()
    report = inspect_checkpoint(Path(directory), hash_files=hash_files)
    seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - cpu
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    inspect_checkpoint(Path(directory), hash_files=hash_files)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    figures = {"seconds": seconds, "cpu_seconds": cpu_seconds, "maxrss_kb": maxrss, "traced_peak_bytes": peak}
    figures["tensors"] = report.tensors.count
    print(json.dumps(figures))


def measure(directory: Path, mode: str, repeat: int) -> dict[str, float]:
    runs = []
    for _ in range(repeat):
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(directory), mode],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        runs.append(json.loads(done.stdout))
    return {
        "seconds": statistics.median(r["seconds"] for r in runs),
        "cpu_seconds": min(r["cpu_seconds"] for r in runs),
        "maxrss_mb": max(r["maxrss_kb"] for r in runs) / 1024,
        "traced_peak_mb": max(r["traced_peak_bytes"] for r in runs) / (1 << 20),
        "tensors": runs[0]["tensors"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--dense", action="store_true", help="random data regions instead of sparse ones")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    done = subprocess.run(
        [sys.executable, __file__, "--child", ".", "import"], capture_output=True, text=True, check=True
    )
    print(f"bare interpreter + import: {json.loads(done.stdout)['maxrss_kb'] / 1024:.1f} MB maxrss")
    with tempfile.TemporaryDirectory(prefix="inspect-bench-") as tmp:
        big = Path(tmp)
        generate(big, int(args.gib * (1 << 30)), args.shards, args.dense)
        size = sum(p.stat().st_size for p in big.iterdir())
        kind = "dense" if args.dense else "sparse"
        cases = [(f"{args.shards}-shard {size / (1 << 30):.2f} GiB ({kind})", big)]
        cases.append(("tiny model (planner/tinylm/checkpoint, 8.8 MB)", ROOT / "planner" / "tinylm" / "checkpoint"))
        for label, directory in cases:
            headers = measure(directory, "headers", args.repeat)
            full = measure(directory, "full", args.repeat)
            print(f"{label}: {headers['tensors']} tensors")
            for name, figures in (("headers only", headers), ("full (hashing)", full)):
                print(
                    f"  {name:15s} wall {figures['seconds'] * 1000:9.1f} ms (median of {args.repeat})  "
                    f"cpu {figures['cpu_seconds'] * 1000:9.1f} ms (least)  maxrss {figures['maxrss_mb']:6.1f} MB  "
                    f"traced peak {figures['traced_peak_mb']:6.2f} MB"
                )
            print(
                f"  headers-only / full: wall {headers['seconds'] / full['seconds']:.4f}, "
                f"cpu {headers['cpu_seconds'] / full['cpu_seconds']:.4f}"
            )


if __name__ == "__main__":
    main()
