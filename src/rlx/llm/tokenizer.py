"""The GGUF file's own vocabulary as a tokenizer that splits text the way llama.cpp does.

transformers builds the ``tokenizers.Tokenizer`` from the vocabulary (its GGUF tokenizer conversion: merges, byte
fallback, the pre-tokenizer regex of ``tokenizer.ggml.pre``, control tokens kept whole); this module feeds it the
metadata rlx's reader has already validated and applies llama.cpp's rules where the two differ (llama.cpp's
``llama-vocab.cpp``, docs/llm.md "Tokenizer"):

- a sentencepiece vocabulary (``tokenizer.ggml.model = "llama"``) gets a space before the text unless
  ``tokenizer.ggml.add_space_prefix`` is false (gemma), also when the text already starts with one;
- a byte-level vocabulary whose ``tokenizer.ggml.pre`` transformers has no split for (smollm, gpt-2, starcoder, …,
  none) is split by llama.cpp's regexes for it (:data:`LLAMA_CPP_SPLITS`);
- BOS is added when ``tokenizer.ggml.add_bos_token`` says so; without the key, for sentencepiece vocabularies and
  for byte-level ones of the llama-3 family; EOS only when ``tokenizer.ggml.add_eos_token`` says so.
"""

from __future__ import annotations

from typing import Any

from rlx.frontends.gguf import GgufError, GgufFile

#: ``tokenizer.ggml.pre`` values for which llama.cpp adds BOS to a byte-level vocabulary by default
LLAMA3_PRE = frozenset({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                        "jina-v5-nano"})
#: sentencepiece vocabularies whose builder in transformers already spells spaces as the file does (no prefix)
_OWN_SPACING = ("gemma", "gemma2", "gemma3", "gemma4")
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_QWEN2 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
#: byte-level pre-tokenizers transformers' conversion has no split for: llama.cpp's regexes, applied in turn (each
#: splits the pieces of the one before); a file without ``tokenizer.ggml.pre`` gets llama.cpp's default
LLAMA_CPP_SPLITS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("gpt-2", "phi-2", "mpt", "olmo", "jais", "exaone4", "roberta-bpe", "mellum", "modern-bert"), (_GPT2,)),
    **dict.fromkeys(("starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"), (r"\p{N}", _GPT2)),
    "stablelm2": (_QWEN2,),
    "falcon": (r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, "[0-9][0-9][0-9]"),
    "default": (r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", "[0-9][0-9][0-9]"),
}


class GgufTokenizer:
    """``encode(text) -> ids`` and ``decode(ids) -> text`` with the vocabulary of one GGUF file."""

    def __init__(self, f: GgufFile):
        try:
            from tokenizers import Regex, normalizers, pre_tokenizers
            from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_TOKENIZER_MAPPING, convert_gguf_tokenizer
        except ImportError as exc:
            raise GgufError("tokenizing text needs transformers (>= 5.24) to read the file's vocabulary") from exc
        kind = f.get("tokenizer.ggml.model")
        if not isinstance(f.get("tokenizer.ggml.tokens"), list):
            raise GgufError(f"{f.path}: no vocabulary (tokenizer.ggml.tokens) to tokenize text with")
        fields = {name: f.get(f"tokenizer.{key}") for key, name in GGUF_TOKENIZER_MAPPING["tokenizer"].items()}
        arch = str(f.get("general.architecture"))
        try:
            self.tok: Any = convert_gguf_tokenizer(arch, {k: v for k, v in fields.items() if v is not None})[0]
        except Exception as exc:  # the library's own refusal of this vocabulary
            raise GgufError(f"{f.path}: cannot build a tokenizer from the file's vocabulary ({type(exc).__name__}: {exc})") from None
        self.space_prefix = kind == "llama" and bool(f.get("tokenizer.ggml.add_space_prefix", True))
        if kind == "llama" and arch not in _OWN_SPACING:
            replace = normalizers.Replace(" ", "\u2581")
            self.tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), replace]) if self.space_prefix else replace
            self.tok.pre_tokenizer = None
        splits = LLAMA_CPP_SPLITS.get(f.get("tokenizer.ggml.pre", "default")) if kind == "gpt2" else None
        if splits:
            self.tok.pre_tokenizer = pre_tokenizers.Sequence([*(pre_tokenizers.Split(Regex(r), behavior="isolated") for r in splits),
                                                              pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        default_bos = kind == "llama" or (kind == "gpt2" and f.get("tokenizer.ggml.pre") in LLAMA3_PRE)
        self.bos = _special(f, "bos", default_bos)
        self.eos = _special(f, "eos", False)
        for which, token in (("bos", self.bos), ("eos", self.eos)):
            if token is not None and not 0 <= token < len(fields["tokens"]):
                raise GgufError(f"{f.path}: tokenizer.ggml.{which}_token_id = {token} is outside the vocabulary of {len(fields['tokens'])}")

    def encode(self, text: str) -> list[int]:
        """The ids llama.cpp's ``llama_tokenize(..., add_special=True, parse_special=True)`` gives (one BOS at most)."""
        ids = list(self.tok.encode(text, add_special_tokens=False).ids)
        if self.bos is not None and ids[:1] != [self.bos]:
            ids.insert(0, self.bos)
        return [*ids, self.eos] if self.eos is not None else ids

    def decode(self, ids: list[int], after: list[int] | None = None) -> str:
        """The text of ``ids``; with ``after`` (e.g. the prompt's ids), as it continues that text (its leading space
        kept), which is how llama.cpp prints generated tokens."""
        if not after:
            return self.tok.decode(ids, skip_special_tokens=True)
        head = self.tok.decode(after, skip_special_tokens=True)
        return self.tok.decode([*after, *ids], skip_special_tokens=True)[len(head):]


def _special(f: GgufFile, which: str, default: bool) -> int | None:
    token = f.get(f"tokenizer.ggml.{which}_token_id")
    add = f.get(f"tokenizer.ggml.add_{which}_token", default)
    return int(token) if add and isinstance(token, int) and not isinstance(token, bool) else None
