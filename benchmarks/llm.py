"""LLM generation speed: a ~100M-parameter random llama written to GGUF (F16, Q8_0, Q4_0) in a temp dir.

For each weight type and thread count: rlx (each backend given) vs transformers eager on the same file (and
llama-cpp-python only if it is importable), prefill and decode tokens/s, and decode time per token against the
memory-bandwidth bound (matmul weight bytes read per token / a STREAM-like NumPy copy's bandwidth, measured in
the same run). Not run by CI; files go to a temp dir that is removed at the end.

    PYTHONPATH=src python benchmarks/llm.py [--types F16,Q8_0,Q4_0] [--threads 1,2] [--prompt 128] [--new 64]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent / "tests" / "llm"))

SHAPE = {"vocab": 32000, "d": 768, "layers": 12, "heads": 12, "kv_heads": 4, "ff": 2048}


def bandwidth(nbytes: int = 256 << 20, rounds: int = 5) -> float:
    """Bytes per second of a large NumPy copy (read + write counted), best of ``rounds``."""
    a = np.ones(nbytes // 8)
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t)
    return 2 * a.nbytes / best


def weight_bytes(model) -> int:
    """Bytes of the weights one decode step reads as the GGUF file stores them (packed bytes for block types; F16
    counted at 2 bytes although rlx widens F16 matmul weights to f32 at load)."""
    return sum(int(model.file.tensors[k].nbytes) for k in model.weights.schemes if k in model.file.tensors)


def bench_rlx(path: Path, backend: str, threads: int, prompt: list[int], new: int, int8: bool) -> dict:
    from rlx.llm import load_gguf

    opts = {"threads": threads} if backend == "onnxruntime" else {}
    t = time.perf_counter()
    model = load_gguf(path, backend=backend, int8_activations=int8, **opts)
    model.generate(prompt[:8], max_new_tokens=2, stop=[])  # compile the graphs (prefill bucket 16, decode)
    model.generate(prompt, max_new_tokens=2, stop=[])  # and the prompt's prefill bucket
    setup = time.perf_counter() - t
    c0 = time.process_time()
    model.logits(prompt)
    c1 = time.process_time()
    model.generate(prompt, max_new_tokens=new, stop=[])
    c2 = time.process_time()
    st = model.last_stats
    return {"setup_s": setup, "prefill_tok_s": len(prompt) / (st["prefill_ms"] / 1e3), "decode_tok_s": st["decode_tokens_per_s"],
            "decode_ms_per_token": 1e3 / st["decode_tokens_per_s"], "weight_bytes": weight_bytes(model),
            "python_us_per_token": st["decode_overhead_us_per_token"],
            # CPU seconds of the process (all its threads): on a loaded machine closer to the work done than wall time
            "cpu_prefill_ms": 1e3 * (c1 - c0), "cpu_decode_ms_per_token": 1e3 * max(c2 - c1 - (c1 - c0), 0.0) / (new - 1)}


def bench_transformers(path: Path, threads: int, prompt: list[int], new: int) -> dict:
    # isort: off
    import models.zoo  # noqa: F401  (first: the torchvision shim)
    import torch
    import transformers
    # isort: on

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(threads)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    ids = torch.tensor([prompt])
    with torch.no_grad():
        model(ids[:, :8])
        t, c0 = time.perf_counter(), time.process_time()
        out = model(ids, use_cache=True)
        prefill, c1 = time.perf_counter() - t, time.process_time()
        past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
        t = time.perf_counter()
        for _ in range(new - 1):
            out = model(tok, past_key_values=past, use_cache=True)
            past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
        dec, c2 = time.perf_counter() - t, time.process_time()
    return {"prefill_tok_s": len(prompt) / prefill, "decode_tok_s": (new - 1) / dec, "decode_ms_per_token": 1e3 * dec / (new - 1),
            "cpu_prefill_ms": 1e3 * (c1 - c0), "cpu_decode_ms_per_token": 1e3 * (c2 - c1) / (new - 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--types", default="F16,Q8_0,Q4_0")
    ap.add_argument("--threads", default=f"1,{os.cpu_count()}")
    ap.add_argument("--backends", default="onnxruntime")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--no-transformers", action="store_true")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = ap.parse_args()
    from gguf_models import write_model

    bw = bandwidth()
    print(f"memory bandwidth (NumPy copy, read + write): {bw / 1e9:.1f} GB/s")
    prompt = list(np.random.default_rng(0).integers(3, SHAPE["vocab"], args.prompt))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for qtype in args.types.split(","):
            t = time.perf_counter()
            path = write_model(Path(tmp) / f"llama100m_{qtype}.gguf", qtype=qtype, **SHAPE)
            print(f"\n{qtype}: wrote {path.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - t:.0f} s")
            for threads in map(int, args.threads.split(",")):
                for backend in args.backends.split(","):
                    for int8 in (False, True) if qtype in ("Q8_0", "Q4_0") else (False,):
                        r = bench_rlx(path, backend, threads, prompt, args.new, int8)
                        r["bound_ms_per_token"] = 1e3 * r["weight_bytes"] / bw
                        engine = f"rlx-{backend}" + ("-int8x" if int8 else "")
                        rows.append({"type": qtype, "threads": threads, "engine": engine, **r})
                        print(f"  {engine:22s} threads={threads}: prefill {r['prefill_tok_s']:7.1f} tok/s, decode "
                              f"{r['decode_tok_s']:6.1f} tok/s ({r['decode_ms_per_token']:.1f} ms/token, Python "
                              f"{r['python_us_per_token']:.0f} us; CPU {r['cpu_decode_ms_per_token']:.1f} ms/token, prefill "
                              f"{r['cpu_prefill_ms']:.0f} ms; bandwidth bound {r['bound_ms_per_token']:.1f} ms = "
                              f"{r['weight_bytes'] / 1e6:.0f} MB / {bw / 1e9:.1f} GB/s)")
                if not args.no_transformers:
                    r = bench_transformers(path, threads, prompt, args.new)
                    rows.append({"type": qtype, "threads": threads, "engine": "transformers-eager", **r})
                    print(f"  {'transformers-eager':22s} threads={threads}: prefill {r['prefill_tok_s']:8.1f} tok/s, decode "
                          f"{r['decode_tok_s']:6.1f} tok/s ({r['decode_ms_per_token']:.1f} ms/token; CPU "
                          f"{r['cpu_decode_ms_per_token']:.1f} ms/token, prefill {r['cpu_prefill_ms']:.0f} ms)")
            try:
                import llama_cpp  # noqa: F401
            except ImportError:
                print("  llama-cpp-python: not installed (not built here)")
    if args.json:
        Path(args.json).write_text(json.dumps({"bandwidth_Bps": bw, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
