"""A hostile checkpoint is refused with the file named, before anything large is read (issue 42)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from planner.inspectjob import InspectionRefused, InspectLimits, inspect_checkpoint
from planner.inspectjob import safetensors_header as header_module
from tests.planner import inspect_checkpoints as ckpt


def _refusal(root: Path, limits: InspectLimits | None = None) -> InspectionRefused:
    with pytest.raises(InspectionRefused) as caught:
        inspect_checkpoint(root, limits=limits or InspectLimits())
    return caught.value


def test_refusal_names_the_file_in_its_message(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    ckpt.raw_safetensors(root / "model.safetensors", {"x": {}}, length=1 << 40)
    refusal = _refusal(root)
    assert isinstance(refusal, ValueError)
    assert refusal.path == "model.safetensors"
    assert str(refusal) == f"model.safetensors: {refusal.message}"
    assert "runs past the end of the file" in refusal.message


def test_header_length_above_the_bound(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    ckpt.raw_safetensors(root / "model.safetensors", b"{" + b" " * 4096 + b"}")
    refusal = _refusal(root, InspectLimits(max_safetensors_header_bytes=1024))
    assert refusal.path == "model.safetensors"
    assert "at most 1,024 bytes" in refusal.message


def test_file_shorter_than_the_length_prefix(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    (root / "extra.safetensors").write_bytes(b"\x01\x02")
    assert _refusal(root).path == "extra.safetensors"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"a": "\xff\xfe"}', "not UTF-8"),
        (b'{"a": ', "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper"),  # past the interpreter's recursion limit
        (  # under it, over the inspection's bound, in a key the format does not define
            b'{"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": ' + b"[" * 40 + b"]" * 40 + b"}}",
            "nested too deep",
        ),
        (b"[1, 2]", "not a JSON object"),
        (b'{"t": {"dtype": "F32", "shape": "big", "data_offsets": [0, 4]}}', "shape"),
    ],
)
def test_safetensors_header_that_is_not_a_header(tmp_path: Path, body: bytes, words: str) -> None:
    root = ckpt.bf16(tmp_path / "m")
    ckpt.raw_safetensors(root / "model.safetensors", body)
    refusal = _refusal(root)
    assert refusal.path == "model.safetensors"
    assert words in refusal.message


@pytest.mark.parametrize(
    "body",
    [b"\xef\xbb\xbf{\xff}", b'{"a":' * 5000 + b"1" + b"}" * 5000, b'{"a":' * 40 + b"1" + b"}" * 40],
    ids=["not-utf8", "deeper-than-recursion", "deeper-than-bound"],
)
def test_config_json_not_utf8_or_too_deep(tmp_path: Path, body: bytes) -> None:
    root = ckpt.bf16(tmp_path / "m")
    (root / "config.json").write_bytes(body)
    assert _refusal(root).path == "config.json"


def test_a_ten_gigabyte_config_is_refused_by_its_size_before_reading(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    with (root / "config.json").open("r+b") as handle:
        handle.truncate(10 * 10**9)  # sparse: 10 GB by stat, nothing on disk
    refusal = _refusal(root)
    assert refusal.path == "config.json"
    assert "10,000,000,000 bytes" in refusal.message


def test_an_oversized_license_file_is_refused(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    with (root / "LICENSE").open("wb") as handle:
        handle.truncate(1 << 30)
    assert _refusal(root).path == "LICENSE"


@pytest.mark.parametrize("where", ["weights.safetensors", "sub/dir/tokenizer.json", "sub"])
def test_a_symbolic_link_anywhere_inside(tmp_path: Path, where: str) -> None:
    root = ckpt.bf16(tmp_path / "m")
    (root / where).parent.mkdir(parents=True, exist_ok=True)
    (root / where).symlink_to(root / "model.safetensors" if "." in where else tmp_path)
    refusal = _refusal(root)
    assert refusal.path == where
    assert "symbolic link" in refusal.message


def test_the_root_itself_a_symbolic_link(tmp_path: Path) -> None:
    real = ckpt.bf16(tmp_path / "real")
    (tmp_path / "link").symlink_to(real)
    refusal = _refusal(tmp_path / "link")
    assert refusal.path == "."
    assert "symbolic link" in refusal.message
    assert inspect_checkpoint(real).precision.key == "bf16"


def test_a_fifo_is_refused_not_opened(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    os.mkfifo(root / "tokenizer.json")
    assert _refusal(root).path == "tokenizer.json"


@pytest.mark.parametrize("target", ["../x.safetensors", "/etc/passwd", "a/../../x.safetensors", "..\\x.safetensors"])
def test_an_index_naming_a_file_outside_the_directory(tmp_path: Path, target: str) -> None:
    root = ckpt.bf16(tmp_path / "m")
    (root / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"lm_head.weight": "model.safetensors", "model.norm.weight": target}})
    )
    refusal = _refusal(root)
    assert refusal.path == "model.safetensors.index.json"
    assert "outside the checkpoint directory" in refusal.message


def test_a_file_name_with_a_newline(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    (root / "evil\nabc 1 config.json").write_text("x")
    assert "line break" in _refusal(root).message


def test_offsets_outside_the_data_region_are_a_problem_not_a_refusal(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    header = {"a.weight": {"dtype": "BF16", "shape": [4, 4], "data_offsets": [0, 32]}}
    ckpt.raw_safetensors(root / "extra.safetensors", header, data=b"\0" * 8)  # 8 of the 32 bytes
    problems = {p.code: p for p in inspect_checkpoint(root).problems}
    assert problems["safetensors.offsets"].file == "extra.safetensors"
    assert "a.weight" in problems["safetensors.offsets"].message


def test_only_the_header_is_read_never_the_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The data region of a shard is never read by the header pass: a shard whose data region is
    missing entirely still inspects, and the bytes its reader returns are exactly 8 + the header."""
    root = ckpt.w4a16(tmp_path / "m")
    shard = root / "model.safetensors"
    length = struct.unpack("<Q", shard.read_bytes()[:8])[0]
    read_sizes: list[int] = []

    class Counting:
        def __init__(self, handle: object) -> None:
            self.handle = handle

        def __enter__(self) -> Counting:
            return self

        def __exit__(self, *exc: object) -> None:
            self.handle.close()  # type: ignore[attr-defined]

        def read(self, size: int = -1) -> bytes:
            data = self.handle.read(size)  # type: ignore[attr-defined]
            read_sizes.append(len(data))
            return data

    monkeypatch.setattr(header_module, "open", lambda *a, **k: Counting(open(*a, **k)), raising=False)  # noqa: SIM115
    report = inspect_checkpoint(root, hash_files=False)
    assert sum(read_sizes) == 8 + length
    assert report.tensors.quantized_tensors > 0

    with shard.open("r+b") as handle:
        handle.truncate(8 + length)  # the data region gone
    report = inspect_checkpoint(root, hash_files=False)
    assert report.precision.key == "w4a16"
    assert {p.code for p in report.problems} >= {"safetensors.offsets"}


def test_reading_a_small_file_does_not_allocate_its_bound(tmp_path: Path) -> None:
    """read(n) allocates n bytes up front: a 1 kB index read with read(max_index_bytes + 1) held 64 MiB,
    which under the job's RLIMIT_AS is memory a real header could not use (bench/inspection.py found it)."""
    import tracemalloc

    root = ckpt.bf16(tmp_path / "m")
    (root / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"lm_head.weight": "model.safetensors"}})
    )
    tracemalloc.start()
    try:
        inspect_checkpoint(root, hash_files=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"{peak / (1 << 20):.1f} MiB"


def test_a_file_name_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    """The manifest, the digest and result.json are UTF-8: a name that cannot be written in it is refused
    by the walk, not left to fail the digest."""
    root = ckpt.bf16(tmp_path / "m")
    with open(os.fsencode(root) + b"/weights-\xff.bin", "wb") as handle:
        handle.write(b"x")
    refusal = _refusal(root)
    assert "UTF-8" in refusal.message
    assert refusal.path == repr("weights-\udcff.bin")
