"""rlx.llm.GgufTokenizer: a GGUF file's vocabulary tokenizes text as llama.cpp does.

Expected ids come from the vocabulary written here (its pieces' positions, merged by the sentencepiece rule: the
adjacent pair forming the best-scored piece first) and, where llama-cpp-python is installed, from llama.cpp's own
tokenizer on the same file.
"""

from __future__ import annotations

import pytest
from gguf_models import _tokens, write_model

from rlx.frontends.gguf import read_gguf
from rlx.llm import GgufTokenizer

pytest.importorskip("gguf")
pytest.importorskip("transformers")

#: a sentencepiece vocabulary whose longer pieces are all pairs of earlier ones (as a trained model's are); scores
#: fall with the position, so "▁t" (before "he") merges first in "▁the"
PIECES = ["▁", "t", "h", "e", "q", "u", "i", "c", "k", "▁t", "he", "▁the", "▁q", "ui", "ck", "▁qui", "▁quick"]
SPM = _tokens(259) + PIECES + [f"w{i}" for i in range(300 - 259 - len(PIECES))]
ID = {piece: i for i, piece in enumerate(SPM)}
TEXTS = ["the quick", " the", "  the  quick ", "quick the\nthe", "Zt", "", "thé 中"]


def _spm(tmp_path, name: str, **extra) -> str:
    return str(write_model(tmp_path / f"{name}.gguf", tokens=SPM, extra=extra or None))


def _byte(ch: str) -> list[int]:
    return [3 + b for b in ch.encode()]  # <0x00> is id 3


def test_sentencepiece_prefix_space_and_bos(tmp_path):
    tok = GgufTokenizer(read_gguf(_spm(tmp_path, "spm")))
    assert tok.encode("the quick") == [1, ID["▁the"], ID["▁quick"]]
    # llama.cpp puts the space before the text even when it starts with one (tokenizers' Metaspace would not)
    assert tok.encode(" the") == [1, ID["▁"], ID["▁the"]]
    assert tok.encode("Zt") == [1, ID["▁"], *_byte("Z"), ID["t"]]  # "Z" is not a piece: its byte
    assert tok.encode("") == [1]
    assert tok.decode(tok.encode("the quick")) == "the quick"
    # generated text continues the prompt's: its leading space is kept
    assert tok.decode([ID["▁quick"]], after=tok.encode("the")) == " quick"


def test_file_keys_switch_prefix_bos_and_eos(tmp_path):
    no_prefix = GgufTokenizer(read_gguf(_spm(tmp_path, "np", add_add_space_prefix=False, add_add_bos_token=False)))
    assert no_prefix.encode("the quick") == [ID["t"], ID["he"], ID["▁quick"]]
    eos = GgufTokenizer(read_gguf(_spm(tmp_path, "eos", add_add_eos_token=True)))
    assert eos.encode("the") == [1, ID["▁the"], 2]


def test_gemma_vocabulary_has_no_prefix_space(tmp_path):
    """gemma (v1) files, which transformers' model loader refuses, still tokenize; the converter writes
    add_space_prefix = false for them."""
    path = write_model(tmp_path / "g.gguf", arch="gemma", tie=True, tokens=SPM, extra={"add_add_space_prefix": False})
    tok = GgufTokenizer(read_gguf(path))
    assert tok.encode("the quick") == [1, ID["t"], ID["he"], ID["▁quick"]]


@pytest.mark.parametrize(("pre", "bos"), [("qwen2", False), ("llama-bpe", True)])
def test_byte_level_bos_follows_the_pre_tokenizer(tmp_path, pre, bos):
    path = write_model(tmp_path / f"{pre}.gguf", arch="qwen2", tokenizer="gpt2", pre=pre, extra={"add_bos_token_id": 299})
    tok = GgufTokenizer(read_gguf(path))
    # ids 0-255 are the bytes, then he, ll, hell, hello (gguf_models.BPE_MERGES)
    assert tok.encode("hello hell") == [299] * bos + [259, 32, 258]


#: "1000000" under each pre-tokenizer with the merges "0 0", "00 0" (ids: bytes 0-255, then "00" 256, "000" 257)
DIGITS = {
    "gpt-2": [49, 256, 256, 256],  # one piece (" ?\p{N}+"): 1 00 00 00 (pairs merge left to right)
    "default": [49, 256, 257, 48],  # cut into 100 | 000 | 0 by "[0-9][0-9][0-9]"
    "smollm": [49] + [48] * 6,  # every digit its own piece (starcoder's rule)
    "qwen2": [49] + [48] * 6,
}


@pytest.mark.parametrize("pre", sorted(DIGITS))
def test_byte_level_splits_digits_as_llama_cpp(tmp_path, pre):
    path = write_model(tmp_path / "d.gguf", arch="qwen2", tokenizer="gpt2", pre=pre, merges=["0 0", "00 0"])
    assert GgufTokenizer(read_gguf(path)).encode("1000000") == DIGITS[pre]


@pytest.mark.parametrize("arch", ["llama", "gemma"])
def test_equals_llama_cpp(tmp_path, arch):
    llama_cpp = pytest.importorskip("llama_cpp")
    extra = {"add_add_space_prefix": False} if arch == "gemma" else {}
    path = str(write_model(tmp_path / f"{arch}.gguf", arch=arch, tie=arch == "gemma", tokens=SPM, extra=extra or None))
    tok = GgufTokenizer(read_gguf(path))
    ref = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    for text in TEXTS:
        assert tok.encode(text) == ref.tokenize(text.encode(), add_bos=True, special=True), text


@pytest.mark.parametrize("pre", ["gpt-2", "default", "smollm", "falcon", "stablelm2", "qwen2", "starcoder"])
def test_byte_level_equals_llama_cpp(tmp_path, pre):
    llama_cpp = pytest.importorskip("llama_cpp")
    merges = ["0 0", "00 0", "1 00", "Ġ 1", "! !", "$ +", "h e", "l l", "he ll", "hell o"]
    path = str(write_model(tmp_path / f"{pre}.gguf", arch="qwen2", tokenizer="gpt2", pre=pre, merges=merges))
    tok = GgufTokenizer(read_gguf(path))
    ref = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    for text in [*TEXTS, "x 1000000 12,000!! $+= hello 100", "a1b22 hello\n\n  hell"]:
        assert tok.encode(text) == ref.tokenize(text.encode(), add_bos=True, special=True), text
