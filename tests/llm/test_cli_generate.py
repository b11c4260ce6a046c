"""``rlx generate`` through a subprocess: --json document, streamed text, sampling flags, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from gguf_models import write_model

from rlx.llm import load_gguf

pytest.importorskip("gguf")

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")


def _rlx(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(SRC)}
    return subprocess.run([sys.executable, "-m", "rlx.cli", *argv], capture_output=True, text=True, env=env, timeout=300, check=False)


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return str(write_model(tmp_path_factory.mktemp("cli") / "m.gguf", qtype="Q8_0", seed=5))


def test_json_with_prompt_ids(path):
    r = _rlx("generate", path, "--prompt-ids", "1,5,9", "--max-new-tokens", "4", "--ignore-eos", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "rlx.generate"
    assert doc["tokens"] == load_gguf(path).generate([1, 5, 9], max_new_tokens=4, stop=[])
    assert doc["compile_ms"] >= 0 and doc["prefill_ms"] > 0 and doc["decode_tokens_per_s"] > 0 and doc["decode_tokens"] == 3


@pytest.mark.slow
def test_prompt_text_uses_the_files_vocabulary(path):
    pytest.importorskip("transformers")
    r = _rlx("generate", path, "--prompt", "hello", "--max-new-tokens", "3", "--json", "--temperature", "0.7", "--top-k", "5",
             "--seed", "2", "--ignore-eos")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    # the toy vocabulary: <s> (bos), then the byte-fallback pieces of "▁" and one token per letter
    assert doc["prompt_tokens"][0] == 1 and doc["prompt_tokens"][-5:] == [266, 263, 270, 270, 273]
    assert len(doc["tokens"]) == 3 and isinstance(doc["text"], str)
    streamed = _rlx("generate", path, "--prompt", "hello", "--max-new-tokens", "3", "--temperature", "0.7", "--top-k", "5",
                    "--seed", "2", "--ignore-eos")
    assert streamed.returncode == 0, streamed.stderr
    # random weights mostly pick byte-fallback tokens, whose text changes as bytes join: only the end must agree
    assert streamed.stdout.endswith(doc["text"][-1:] + "\n")


def test_streams_text(path, capsys):
    """Without --json the new text streams to stdout (in process: the subprocess tests above cover the entry point)."""
    pytest.importorskip("transformers")
    from rlx.cli import main

    assert main(["generate", path, "--prompt", "hello", "--max-new-tokens", "3", "--ignore-eos"]) == 0
    out = capsys.readouterr().out
    assert out.endswith("\n") and len(out) > 1


@pytest.mark.parametrize(("argv", "expect"), [
    (["--prompt-ids", "1,2"], "not a GGUF file"),
    (["--prompt-ids", "1,x"], "comma-separated"),
])
def test_errors(tmp_path, path, argv, expect):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model at all, just some bytes....")
    target = str(bad) if expect == "not a GGUF file" else path
    r = _rlx("generate", target, *argv)
    assert r.returncode in (1, 2) and expect in r.stderr, r.stderr
    if expect == "not a GGUF file":
        assert r.returncode == 1 and r.stderr.startswith("rlx: error:")


def test_byte_level_bpe_vocabulary_in_process(tmp_path, capsys):
    """A qwen2 file with a GPT-2 style byte-level BPE vocabulary: the prompt goes through its merges."""
    pytest.importorskip("transformers")
    from rlx.cli import main

    path = write_model(tmp_path / "bpe.gguf", arch="qwen2", qtype="Q8_0", tokenizer="gpt2")
    assert main(["generate", str(path), "--prompt", "hello hell", "--max-new-tokens", "3", "--json", "--ignore-eos"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # ids 0-255 are the bytes, then he, ll, hell, hello: "hello" merges fully, " hell" is the space byte and "hell"
    assert doc["prompt_tokens"] == [259, 32, 258]
    assert len(doc["tokens"]) == 3 and doc["backend"] in ("onnxruntime", "numpy")


def test_file_without_vocabulary_prints_ids(tmp_path, capsys):
    """No tokenizer.ggml.* keys: --prompt-ids still generates; the new ids are printed (what greedy decoding of the
    same file gives through the API), and --prompt is refused with the reason."""
    from rlx.cli import main

    path = str(write_model(tmp_path / "novocab.gguf", qtype="Q8_0", tokenizer="none"))
    assert main(["generate", path, "--prompt-ids", "1,5,9", "--max-new-tokens", "3", "--ignore-eos"]) == 0
    expected = load_gguf(path).generate([1, 5, 9], max_new_tokens=3, stop=[])
    assert capsys.readouterr().out.split() == [str(t) for t in expected]
    assert main(["generate", path, "--prompt", "hi"]) == 1
    assert "no vocabulary" in capsys.readouterr().err
