"""Quantize runs: a derivative made by llm-compressor on a cluster, registered with its lineage."""
