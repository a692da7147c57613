"""Quantization numerics (torch): group-wise INT4, per-channel INT8, FP8; activation quantization;
module swapping for Hugging Face models (linear layers and fused MoE experts)."""
