"""Offline stand-ins for tests and GPU benchmarks: a byte-level BPE trained on the eval texts, and a
random-weight model spec built from a real architecture config (no downloads anywhere)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from planner.evaljob.run import DEFAULT_SET

QWEN3_30B_A3B = {
    "model_type": "qwen3_moe",
    "vocab_size": 151936,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_hidden_layers": 48,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "max_position_embeddings": 40960,
    "norm_topk_prob": True,
    "tie_word_embeddings": False,
}
TINY_QWEN3_MOE: dict[str, Any] = {
    "model_type": "qwen3_moe",
    "vocab_size": 512,
    "hidden_size": 128,
    "intermediate_size": 256,
    "moe_intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "max_position_embeddings": 4096,
}


# The same "User: …\nAssistant:" layout the in-process screening job writes (cases.prompt_text).
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] | capitalize }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}"
)


def train_tokenizer(path: Path, vocab_size: int = 512) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    corpus = ["\n".join(json.loads(line)["turns"]) for line in DEFAULT_SET.read_text(encoding="utf-8").splitlines()]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<pad>", "<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(corpus, trainer)
    tokenizer.save(str(path))
    return path


def random_model_spec(
    config: dict[str, Any], tokenizer_file: Path, dtype: str = "bfloat16", seed: int = 0
) -> dict[str, Any]:
    return {"config": config, "tokenizer_file": str(tokenizer_file), "dtype": dtype, "seed": seed}


def save_tiny_checkpoint(out: Path, config: dict[str, Any] | None = None, seed: int = 0) -> Path:
    """A Hugging Face checkpoint directory (random weights + the trained tokenizer) that the eval job
    loads by path like a real model: the embedded default's test model, made with no download."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    staging = out.with_name(f".{out.name}.tmp")
    staging.mkdir(parents=True, exist_ok=True)
    tokenizer_file = train_tokenizer(staging / "bpe.json")
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_file), eos_token="<eos>", pad_token="<pad>")  # noqa: S106
    tokenizer.chat_template = CHAT_TEMPLATE  # an engine's chat API renders the eval's turns with it
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**(config or TINY_QWEN3_MOE)), dtype=torch.bfloat16)
    tokenizer.save_pretrained(str(out))
    model.save_pretrained(str(out))
    # transformers 5 writes `num_local_experts`; Hub checkpoints of Qwen3-MoE (and the planner) say `num_experts`.
    saved = json.loads((out / "config.json").read_text())
    saved.setdefault("num_experts", saved.get("num_local_experts"))
    (out / "config.json").write_text(json.dumps(saved, indent=2) + "\n")
    (out / ".complete").write_text("tiny-qwen3-moe\n")
    tokenizer_file.unlink()
    staging.rmdir()
    return out


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="write the tiny random-weight test checkpoint")
    parser.add_argument("--out", required=True, type=Path)
    print(save_tiny_checkpoint(parser.parse_args().out))
