"""The weights digest of a checkpoint directory. One implementation, planner.manifest: the
quantize job computes a derivative's digest with the same code on the cluster node, so the digest the
service registers and the one the node reports cannot drift apart (the service may import the
planner; the planner may not import the service)."""

from planner.manifest import CHUNK, file_sha256, iter_files, manifest, manifest_lines, weights_digest

__all__ = ["CHUNK", "file_sha256", "iter_files", "manifest", "manifest_lines", "weights_digest"]
