"""``rlx generate MODEL.gguf``: text (or token ids) in, generated tokens out, through rlx.llm's compiled graphs.

``--prompt`` is tokenized with the file's own vocabulary as llama.cpp tokenizes it (:class:`rlx.llm.GgufTokenizer`);
the new text streams to stdout as tokens arrive; ``--json`` prints one rlx.generate document instead.
"""

from __future__ import annotations

import argparse
import sys

from rlx.cli import common
from rlx.cli.common import UsageError
from rlx.cli.output import emit_json


def _ids(text: str) -> list[int]:
    try:
        ids = [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        raise UsageError(f"--prompt-ids must be comma-separated integers, got {text!r}") from None
    if not ids:
        raise UsageError("--prompt-ids is empty")
    return ids


def run(args: argparse.Namespace) -> int:
    from rlx.llm import GgufTokenizer, load_gguf

    if (args.prompt is None) == (args.prompt_ids is None):
        raise UsageError("give exactly one of --prompt and --prompt-ids")
    if args.temperature < 0 or not 0 < args.top_p <= 1 or args.top_k < 0 or args.max_new_tokens < 0:
        raise UsageError("need --temperature >= 0, 0 < --top-p <= 1, --top-k >= 0, --max-new-tokens >= 0")
    given = _ids(args.prompt_ids) if args.prompt_ids is not None else None
    model = load_gguf(args.file, backend=args.backend, int8_activations=args.int8_activations)
    has_vocab = isinstance(model.file.get("tokenizer.ggml.tokens"), list)
    tok = GgufTokenizer(model.file) if args.prompt is not None or (has_vocab and not args.json) else None
    ids: list[int]
    if args.prompt is not None:
        assert tok is not None
        ids = tok.encode(args.prompt)
        if not ids:
            raise UsageError("--prompt tokenizes to no tokens")
    else:
        assert given is not None
        ids = given
    state = {"text": ""}

    def stream(token: int, new: list[int] = []) -> None:  # noqa: B006  (the ids generated so far)
        assert tok is not None
        new.append(token)
        text = tok.decode(new, after=ids)
        if text.endswith("\ufffd"):  # an incomplete UTF-8 sequence: wait for its next bytes
            return
        sys.stdout.write(text[len(state["text"]):])
        sys.stdout.flush()
        state["text"] = text

    tokens = model.generate(ids, max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                            top_p=args.top_p, seed=args.seed, stop=[] if args.ignore_eos else None,
                            on_token=None if args.json or tok is None else stream)
    st = model.last_stats
    if args.json:
        body = {"model": args.file, "architecture": model.config.arch, "backend": model.backend, "prompt_tokens": ids,
                "tokens": tokens, **{k: st[k] for k in ("compile_ms", "prefill_ms", "decode_tokens_per_s", "decode_tokens")}}
        if tok is not None:
            body["text"] = tok.decode(tokens, after=ids)
        emit_json("generate", body)
    else:
        # a file without a vocabulary (and --prompt-ids): the new ids
        sys.stdout.write(tok.decode(tokens, after=ids)[len(state["text"]):] if tok is not None else " ".join(map(str, tokens)))
        sys.stdout.write("\n")
    return 0


def add_parser(sub: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    p = common.command_parser(sub, parent, "generate", run,
                              "generate tokens from a GGUF language model (llama, mistral, qwen2, qwen3, gemma 1-3, phi3)",
                              file_help="a GGUF model file (llama.cpp's format)")
    p.add_argument("--prompt", default=None,
                   help="prompt text, tokenized with the file's vocabulary as llama.cpp does (needs transformers)")
    p.add_argument("--prompt-ids", default=None, metavar="1,2,3", help="prompt as comma-separated token ids")
    p.add_argument("--max-new-tokens", type=int, default=32, metavar="N", help="tokens to generate at most (default 32)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default); else sample")
    p.add_argument("--top-k", type=int, default=0, help="sample among the k most likely (0 = off)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling threshold (1 = off)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (Philox; 0 = the sample op's default key)")
    p.add_argument("--ignore-eos", action="store_true", help="do not stop at the file's end-of-sequence token")
    p.add_argument("--backend", default="auto", metavar="NAME",
                   help="a registered backend; auto (default): onnxruntime when installed (Q4_0 / Q8_0 weights stay packed), "
                        "else numpy (the reference executor)")
    p.add_argument("--int8-activations", action="store_true",
                   help="Q4_0 / Q8_0 matmuls take int8 activation blocks (llama.cpp's scheme; integer kernels on onnxruntime "
                        "and openvino)")
    p.add_argument("--json", action="store_true", help="one JSON document: tokens, prefill_ms, decode_tokens_per_s …")
