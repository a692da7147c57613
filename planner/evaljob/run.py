"""python -m planner.evaljob run --spec spec.json --out DIR  (screening: simulated quantization)

Loads the baseline (a local Hugging Face model directory, or a config for a random-weight model
in tests), builds the quantized variant, runs every case through both in this process, caches
each finished case (a requeued job resumes), prints progress lines, and writes result.json
atomically with result.json.sha256.
"""

from __future__ import annotations

import copy
import hashlib
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch

from planner.cluster.base import job_main, write_atomic, write_result
from planner.evaljob.cases import DEFAULT_SET, case_file_name, load_cases, prompt_text
from planner.evaljob.metrics import case_verdict, token_agreement
from planner.evaljob.summary import summarize
from planner.manifest import resolve_inside_roots
from planner.quant.modules import quantize_model
from planner.quant.schemes import scheme as scheme_named


def load_models(spec: dict[str, Any], device: str) -> tuple[Any, Any]:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

    model_spec = spec["model"]
    dtype = getattr(torch, model_spec.get("dtype", "bfloat16"))
    if "path" in model_spec:
        tokenizer = AutoTokenizer.from_pretrained(model_spec["path"], local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(model_spec["path"], dtype=dtype, local_files_only=True)
    else:  # a random-weight model built from a config (tests, and GPU runs without weights)
        tokenizer = PreTrainedTokenizerFast(
            tokenizer_file=model_spec["tokenizer_file"],
            eos_token="<eos>",  # noqa: S106
            pad_token="<pad>",  # noqa: S106
        )
        config = AutoConfig.for_model(**model_spec["config"])
        torch.manual_seed(int(model_spec.get("seed", 0)))
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    loaded: Any = model
    return tokenizer, loaded.to(device).eval()


@torch.no_grad()
def generate(model: Any, tokenizer: Any, text: str, max_new_tokens: int, device: str) -> tuple[str, list[int]]:
    encoded = tokenizer(text, return_tensors="pt").to(device)
    output = model.generate(
        **encoded,
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
    )
    new = output[0, encoded["input_ids"].shape[1] :]
    return tokenizer.decode(new, skip_special_tokens=True), output[0].tolist()


def versions(device: str) -> dict[str, Any]:
    import transformers

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.version.cuda,
        "device": device,
    }
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def cached_record(path: Path, case: dict[str, Any], key: str) -> dict[str, Any] | None:
    """A finished case of this job (its id and the spec's key), or None: anything else is run again."""
    try:
        record = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("key") != key or record.get("id") != case["id"]:
        return None
    if type(record["id"]) is not type(case["id"]):
        return None
    return record


def run(spec: dict[str, Any], out: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "cases").mkdir(exist_ok=True)
    if "path" in spec.get("model", {}):  # checked where it leads, before anything is loaded from it
        spec["model"]["path"] = str(
            resolve_inside_roots(spec["model"]["path"], spec.get("model_roots") or [], "model.path")
        )
    device = spec.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
    cases, set_sha = load_cases(spec.get("eval_set"), spec.get("max_cases_per_category"))
    # What the cached cases depend on: the whole spec (model, scheme, limits) and the eval set's bytes.
    key = hashlib.sha256(json.dumps([spec, set_sha], sort_keys=True).encode()).hexdigest()[:32]
    chosen = scheme_named(spec["scheme"], spec.get("group_size"))
    started = time.perf_counter()
    tokenizer, baseline = load_models(spec, device)
    quantized = copy.deepcopy(baseline)
    began = time.perf_counter()
    applied = quantize_model(quantized, chosen, spec.get("ignore"), real_int8=bool(spec.get("real_int8")))
    quantize_s = time.perf_counter() - began
    max_new = int(spec.get("max_new_tokens", 32))
    timings = {"baseline_s": 0.0, "quantized_s": 0.0}
    for done, case in enumerate(cases, start=1):
        cache = out / "cases" / case_file_name(case["id"])
        if cached_record(cache, case, key) is not None:
            print(f"progress {done}/{len(cases)} (cached {case['id']})", flush=True)
            continue
        text = prompt_text(case["turns"])
        t0 = time.perf_counter()
        base_text, base_tokens = generate(baseline, tokenizer, text, max_new, device)
        t1 = time.perf_counter()
        quant_text, _ = generate(quantized, tokenizer, text, max_new, device)
        t2 = time.perf_counter()
        timings["baseline_s"] += t1 - t0
        timings["quantized_s"] += t2 - t1
        ids = torch.tensor([base_tokens], device=device)
        tokens = token_agreement(baseline(ids).logits[0], quantized(ids).logits[0])
        record = {
            "id": case["id"],
            "category": case["category"],
            "baseline": base_text,
            "quantized": quant_text,
            **case_verdict(case, base_text, quant_text),
            "tokens": tokens,
            "key": key,
        }
        write_atomic(cache, json.dumps(record, ensure_ascii=False).encode())
        print(f"progress {done}/{len(cases)}", flush=True)
    records = []
    for case in cases:
        finished = cached_record(out / "cases" / case_file_name(case["id"]), case, key)
        if finished is None:
            raise ValueError(f"case {case['id']}: its cached record changed while the job ran")
        records.append(finished)
    result = summarize(records, float(spec.get("threshold", 0.05)))
    result.update(
        {
            "scheme": spec["scheme"],
            "quantization": applied,
            "eval_set_sha256": set_sha,
            "versions": versions(device),
            "timing": {
                "quantize_s": round(quantize_s, 3),
                "total_s": round(time.perf_counter() - started, 3),
                "baseline_cases_per_s": len(cases) / timings["baseline_s"] if timings["baseline_s"] else None,
                "quantized_cases_per_s": len(cases) / timings["quantized_s"] if timings["quantized_s"] else None,
            },
        }
    )
    data = json.dumps(result, ensure_ascii=False, sort_keys=True).encode()
    write_result(out, data)
    return result


def main(argv: list[str] | None = None) -> int:
    return job_main(
        "planner.evaljob", run, lambda r: f"pass={r['pass']} overall bound={r['overall']['upper_bound_95']:.4f}", argv
    )


__all__ = ["DEFAULT_SET", "load_cases", "main", "run", "summarize"]
