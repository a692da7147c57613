"""The quantize job payload that runs ON the cluster: llm-compressor applies a recipe to a checkpoint
and writes a compressed-tensors checkpoint, its manifest digest and result.json. No Django here."""
