"""Corrupt, truncated and hostile GGUF files give a typed GgufError (an RlxError), in limited child processes."""

from __future__ import annotations

import os
import struct

import pytest
from gguf_models import write_model

from security.isolate import run_cases

gguf = pytest.importorskip("gguf")

CHILDREN = os.path.join(os.path.dirname(__file__), "children.py")


def _patched(src: str, dst: str, at: int, data: bytes) -> str:
    raw = bytearray(open(src, "rb").read())
    raw[at:at + len(data)] = data
    open(dst, "wb").write(bytes(raw))
    return dst


def _tensor_info_offsets(path: str, name: str) -> tuple[int, int]:
    """File offsets of (first dim, data offset) in the tensor-info record of ``name``."""
    r = gguf.GGUFReader(path)
    t = next(t for t in r.tensors if t.name == name)
    dims_at = t.field.offset + 8 + len(name.encode()) + 4
    return dims_at, dims_at + 8 * len(t.shape) + 4


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return str(write_model(tmp_path_factory.mktemp("gguf") / "good.gguf", qtype="Q8_0"))


def test_hostile_files_raise_gguf_error(good, tmp_path):
    size = os.path.getsize(good)
    blob = open(good, "rb").read()
    dims_at, offset_at = _tensor_info_offsets(good, "blk.0.attn_q.weight")
    cases: dict[str, tuple[str, str]] = {}

    def add(label: str, data: bytes, expect: str) -> None:
        path = str(tmp_path / f"{label}.gguf")
        open(path, "wb").write(data)
        cases[label] = (path, expect)

    add("empty", b"", "too short")
    add("bad_magic", b"GGML" + blob[4:], "bad magic")
    add("header_only", blob[:30], "corrupt or truncated")
    add("cut_in_metadata", blob[:size // 50], "corrupt or truncated")
    add("cut_in_weights", blob[:size - 1000], "truncated")
    add("huge_kv_count", blob[:16] + struct.pack("<Q", 1 << 62) + blob[24:], "corrupt or truncated")
    add("huge_tensor_count", blob[:8] + struct.pack("<Q", 1 << 62) + blob[16:], "corrupt or truncated")
    cases["huge_dim"] = (_patched(good, str(tmp_path / "huge_dim.gguf"), dims_at, struct.pack("<Q", 1 << 45)), "")
    cases["offset_past_end"] = (_patched(good, str(tmp_path / "off.gguf"), offset_at, struct.pack("<Q", 1 << 50)), "")
    cases["wrong_shape"] = (str(write_model(tmp_path / "shape.gguf", extra={"add_feed_forward_length": 80})), "ffn_gate")
    cases["unsupported_arch"] = (str(write_model(tmp_path / "arch.gguf", arch="gpt2")), "architecture 'gpt2'")
    cases["bad_heads"] = (str(write_model(tmp_path / "heads.gguf", extra={"add_head_count_kv": 3})), "head_count_kv")
    cases["bad_softcap"] = (str(write_model(tmp_path / "cap.gguf", arch="gemma2", tie=True,
                                            extra={"add_attn_logit_softcapping": -1.0})), "soft-capping")
    cases["bad_window"] = (str(write_model(tmp_path / "win.gguf", arch="gemma3", tie=True, extra={"add_sliding_window": 0})),
                           "sliding_window")
    labels = list(cases)
    outcomes = run_cases(CHILDREN, "load_and_run", [[cases[k][0]] for k in labels], wall=60)
    wrong = [(label, out) for label, out in zip(labels, outcomes)
             if not (out.exited and out.is_a("GgufError") and out.is_a("RlxError") and cases[label][1] in out.message)]
    assert not wrong, wrong


def test_unsupported_tensor_type(tmp_path):
    """A weight in a block type rlx does not decode (Q8_1, a type ggml keeps for activations) is refused by name."""
    import numpy as np

    from rlx.llm import GgufError, load_gguf

    path = tmp_path / "iq.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    for key, value in (("add_block_count", 1), ("add_embedding_length", 32), ("add_feed_forward_length", 32),
                       ("add_head_count", 2), ("add_context_length", 64)):
        getattr(w, key)(value)
    rng = np.random.default_rng(0)
    w.add_tensor("token_embd.weight", rng.standard_normal((8, 32)).astype(np.float32))
    w.add_tensor("output_norm.weight", np.ones(32, np.float32))
    for name in ("attn_norm", "ffn_norm"):
        w.add_tensor(f"blk.0.{name}.weight", np.ones(32, np.float32))
    for name in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"):
        w.add_tensor(f"blk.0.{name}.weight", rng.integers(0, 255, (32, 40), dtype=np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q8_1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(GgufError, match="Q8_1"):
        load_gguf(path)


def test_hostile_vocabularies_raise_gguf_error(tmp_path):
    """A vocabulary the tokenizer cannot be built from is refused with the reason, in a limited child process."""
    cases = {
        "no_vocabulary": (write_model(tmp_path / "none.gguf", tokenizer="none"), "no vocabulary"),
        "merge_without_pair": (write_model(tmp_path / "merge.gguf", arch="qwen2", tokenizer="gpt2", merges=["h e", "xyz"]),
                               "cannot build a tokenizer"),
        "bos_out_of_range": (write_model(tmp_path / "bos.gguf", arch="qwen2", tokenizer="gpt2", pre="llama-bpe",
                                         extra={"add_bos_token_id": 10 ** 6}), "bos_token_id"),
    }
    outcomes = run_cases(CHILDREN, "tokenize", [[str(path)] for path, _ in cases.values()], wall=60)
    wrong = [(label, out) for (label, (_, expect)), out in zip(cases.items(), outcomes)
             if not (out.exited and out.is_a("GgufError") and expect in out.message)]
    assert not wrong, wrong
