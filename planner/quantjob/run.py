"""python -m planner.quantjob run --spec spec.json --out DIR

Verifies the parent checkpoint's manifest digest, applies a recipe with llm-compressor (calibrated
on the calibration set where the recipe needs it), writes the compressed-tensors checkpoint into a
staging directory and renames it into place, computes the derivative's manifest digest here on the
node, and writes result.json (atomically, with its checksum).

Restart rules: the checkpoint directory appears only by an atomic rename, so it exists whole or not
at all. A requeued job whose checkpoint exists only re-hashes it (resumed); one killed mid-way
leaves a staging directory that the next attempt deletes before starting over.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import shutil
import time
from pathlib import Path
from typing import Any

from planner.cluster.base import job_main, write_result
from planner.manifest import digest_of_manifest, manifest, manifest_digest, resolve_inside_roots
from planner.quantjob import recipes
from planner.quantjob.calibration import DEFAULT_CALIBRATION, load
from planner.quantjob.obligations import carry_obligations


def tool_versions() -> dict[str, Any]:
    """Installed versions, read from package metadata (a resumed job records them without importing)."""
    from importlib.metadata import PackageNotFoundError, version

    info: dict[str, Any] = {"python": platform.python_version()}
    for name in ("llmcompressor", "compressed-tensors", "torch", "transformers"):
        try:
            info[name.replace("-", "_")] = version(name)
        except PackageNotFoundError:
            info[name.replace("-", "_")] = None
    return info


def available_presets() -> frozenset[str] | None:
    """The quantization presets the installed compressed-tensors knows; None when it is not installed."""
    try:
        from compressed_tensors.quantization.quant_scheme import PRESET_SCHEMES
    except ImportError:
        return None
    return frozenset(PRESET_SCHEMES)


def build_modifiers(data: dict[str, Any]) -> list[Any]:
    modifiers = []
    for item in data["modifiers"]:
        module = importlib.import_module(recipes.MODIFIER_TYPES[item["type"]])
        arguments = {k: v for k, v in item.items() if k != "type"}
        modifiers.append(getattr(module, item["type"])(**arguments))
    return modifiers


def _spec_path(spec: dict[str, Any], key: str) -> Path:
    value = spec.get(key)
    if not isinstance(value, str) or not value.startswith("/"):
        raise ValueError(f"{key}: an absolute path")
    return Path(value)


def confine_paths(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with its paths resolved inside the cluster's model roots (`model_roots`), before
    anything is read or written: the parent checkpoint, the calibration file and the output
    directory's parent (the output itself does not exist yet). A link out of the roots is refused."""
    roots = spec.get("model_roots") or []
    confined = {
        **spec,
        "model_path": str(resolve_inside_roots(str(_spec_path(spec, "model_path")), roots, "model_path")),
    }
    target = _spec_path(spec, "output_dir")
    if target.name in ("", ".", ".."):
        raise ValueError("output_dir: a directory name")
    parent = resolve_inside_roots(str(target.parent), roots, "output_dir")
    confined["output_dir"] = str(parent / target.name)
    calibration = spec.get("calibration") or {}
    if calibration.get("path"):
        path = resolve_inside_roots(str(calibration["path"]), roots, "calibration.path")
        confined["calibration"] = {**calibration, "path": str(path)}
    return confined


def quantize(spec: dict[str, Any], data: dict[str, Any], staging: Path) -> dict[str, Any]:
    """Apply the recipe and save the compressed checkpoint into `staging`; returns calibration facts."""
    import torch
    from llmcompressor import oneshot
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = _spec_path(spec, "model_path")
    device = spec.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = AutoTokenizer.from_pretrained(str(source), local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(source), dtype="auto", local_files_only=True)
    model = model.to(device)  # type: ignore[arg-type]
    calibration: dict[str, Any] = {"used": False}
    arguments: dict[str, Any] = {}
    if data["calibration"]:
        settings = spec.get("calibration") or {}
        path = Path(settings["path"]) if settings.get("path") else DEFAULT_CALIBRATION
        samples, max_len = int(settings.get("samples", 128)), int(settings.get("max_seq_length", 512))
        texts, sha256 = load(path, samples)
        from datasets import Dataset

        encoded = tokenizer(texts, truncation=True, max_length=max_len)
        arguments = {
            "dataset": Dataset.from_dict(
                {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}
            ),
            "num_calibration_samples": len(texts),
            "max_seq_length": max_len,
        }
        calibration = {
            "used": True,
            "source": "default" if path == DEFAULT_CALIBRATION else str(path),
            "sha256": sha256,
            "samples": len(texts),
            "max_seq_length": max_len,
        }
    oneshot(model=model, recipe=build_modifiers(data), **arguments)
    model.save_pretrained(str(staging), save_compressed=True)
    tokenizer.save_pretrained(str(staging))
    carried = carry_obligations(source, staging, spec, str(data.get("name", "")))
    print(f"carried the parent's {', '.join(carried) or 'no license files'} and wrote the model card", flush=True)
    return calibration


def run(spec: dict[str, Any], out: Path) -> dict[str, Any]:
    started = time.perf_counter()
    data = recipes.validate(spec.get("recipe"))
    requested = str(_spec_path(spec, "output_dir"))  # reported as asked: the service compares it with its own
    spec = confine_paths(spec)
    source = _spec_path(spec, "model_path")
    target = _spec_path(spec, "output_dir")
    parent_digest = manifest_digest(source)
    expected = spec.get("parent_digest")
    if expected and expected != parent_digest:
        # never the digest found: the directory may be another team's checkpoint
        raise ValueError(f"parent_digest: the files at {source} do not match the parent's registered {expected}")
    out.mkdir(parents=True, exist_ok=True)
    facts_file = out / "calibration.json"  # survives a requeue next to the attempt's outputs
    resumed = target.is_dir()
    if not resumed:
        target.parent.mkdir(parents=True, exist_ok=True)
        for stale in target.parent.glob(f".{target.name}.staging-*"):  # a killed attempt's leftovers
            shutil.rmtree(stale)
        presets = available_presets()
        if presets is None:
            raise ValueError("llm-compressor / compressed-tensors are not installed in this interpreter")
        why_not = recipes.refusal(data, presets)
        if why_not:
            raise ValueError(why_not)
        staging = target.parent / f".{target.name}.staging-{os.environ.get('GOV_ATTEMPT', '0')}"
        print(f"quantizing {source.name} with {data['name']}", flush=True)
        calibration = quantize(spec, data, staging)
        (staging.parent / f".{target.name}.calibration.json").write_text(json.dumps(calibration))
        os.replace(staging, target)  # the checkpoint appears whole or not at all
    else:
        print(f"checkpoint {target} already complete: re-hashing it", flush=True)
    calibration_record = target.parent / f".{target.name}.calibration.json"
    calibration = json.loads(calibration_record.read_text()) if calibration_record.exists() else {"used": None}
    facts_file.write_text(json.dumps(calibration))
    config = json.loads((target / "config.json").read_text())
    lines = "".join(manifest(target))  # hashed once: the digest is computed from exactly these lines
    result = {
        "name": spec.get("output_name"),
        "checkpoint": requested,
        "manifest_digest": digest_of_manifest(lines),
        "manifest": lines,
        "parent_digest": parent_digest,
        "recipe": data,
        "calibration": calibration,
        "quantization_config": config.get("quantization_config"),
        "config": config,
        "versions": tool_versions(),
        "resumed": resumed,
        "seconds": round(time.perf_counter() - started, 3),
    }
    write_result(out, json.dumps(result, ensure_ascii=False, sort_keys=True).encode())
    return result


def main(argv: list[str] | None = None) -> int:
    return job_main("planner.quantjob", run, lambda r: f"{r['manifest_digest']} at {r['checkpoint']}", argv)
