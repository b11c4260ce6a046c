"""LLM generation speed: a ~100M-parameter random llama written to GGUF (F16, Q8_0, Q4_0) in a temp dir.

For each weight type and thread count: rlx (each backend given) vs llama.cpp (``llama-cpp-python``, when importable:
it is built from source and stays out of rlx's extras) and transformers eager on the same file, prefill and decode
tokens/s, and decode time per token against the memory-bandwidth bound (matmul weight bytes read per token / a
STREAM-like NumPy copy's bandwidth on as many threads, measured in the same run). Per type and thread count every engine is set up
once (model loaded, graphs compiled, warmed), then runs ``--rounds R`` interleaved rounds (each round every engine
once, the order rotated: drift on a shared machine hits all alike); an engine's row is its median round by decode
time, with the best prefill and the fastest single token over all rounds.
Prints one table per thread count with the ratios the issue's "Done when" asks for. Not run by CI; files go to a
temp dir that is removed at the end (or ``--dir``, kept, to reuse between runs).

    PYTHONPATH=src python benchmarks/llm.py [--types F16,Q8_0,Q4_0] [--threads 1,2] [--prompt 128] [--new 64] [--rounds 3] [--profile]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent / "tests" / "llm"))

SHAPE = {"vocab": 32000, "d": 768, "layers": 12, "heads": 12, "kv_heads": 4, "ff": 2048}


def bandwidth(threads: int = 1, nbytes: int = 256 << 20, rounds: int = 10) -> float:
    """Bytes per second of a large NumPy copy (read + write counted) split over ``threads`` threads (NumPy releases
    the GIL while it copies), best of ``rounds``: the bound at N threads is what N cores can stream, not one."""
    a = np.ones(nbytes // 8)
    b = np.zeros_like(a)  # written once first: page faults are not bandwidth
    sources, targets = np.array_split(a, threads), np.array_split(b, threads)
    best = float("inf")
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(rounds):
            t = time.perf_counter()
            list(pool.map(np.copyto, targets, sources))
            best = min(best, time.perf_counter() - t)
    return 2 * a.nbytes / best


def weight_bytes(model) -> int:
    """Bytes of the weights one decode step reads as the GGUF file stores them (packed bytes for block types; F16
    counted at 2 bytes although rlx widens F16 matmul weights to f32 at load)."""
    names = [n for k in model.weights.schemes for n in model.weights.merged.get(k, ((k,), ()))[0]]
    return sum(int(model.file.tensors[n].nbytes) for n in names if n in model.file.tensors)


Runner = Callable[[list[int], int], dict]


def rlx_runner(path: Path, threads: int, prompt: list[int], backend: str, int8: bool, ov_config: dict | None = None) -> Runner:
    """rlx on ``backend``, loaded and warmed; the runner times one prefill and one generate."""
    from rlx.llm import load_gguf

    opts: dict = {"threads": threads} if backend in ("onnxruntime", "openvino") else {}
    if backend == "openvino" and ov_config:
        opts["config"] = ov_config
    t = time.perf_counter()
    model = load_gguf(path, backend=backend, int8_activations=int8, **opts)
    model.generate(prompt[:8], max_new_tokens=2, stop=[])  # compile the graphs (prefill bucket 16, decode)
    model.generate(prompt, max_new_tokens=2, stop=[])  # and the prompt's prefill bucket
    setup, wbytes = time.perf_counter() - t, weight_bytes(model)

    def run(prompt: list[int], new: int) -> dict:
        c0 = time.process_time()
        model.logits(prompt)
        c1 = time.process_time()
        model.generate(prompt, max_new_tokens=new, stop=[])
        c2 = time.process_time()
        st = model.last_stats
        return {"setup_s": setup, "prefill_tok_s": len(prompt) / (st["prefill_ms"] / 1e3), "decode_tok_s": st["decode_tokens_per_s"],
                "decode_ms_per_token": 1e3 / st["decode_tokens_per_s"], "weight_bytes": wbytes,
                "python_us_per_token": st["decode_overhead_us_per_token"], "fastest_ms": st["decode_ms_fastest_token"],
                # CPU seconds of the process (all its threads): on a loaded machine closer to the work done than wall time
                "cpu_prefill_ms": 1e3 * (c1 - c0), "cpu_decode_ms_per_token": 1e3 * max(c2 - c1 - (c1 - c0), 0.0) / (new - 1)}

    return run


def transformers_runner(path: Path, threads: int) -> Runner:
    # isort: off
    import models.zoo  # noqa: F401  (first: the torchvision shim)
    import torch
    import transformers
    # isort: on

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(threads)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)

    def run(prompt: list[int], new: int) -> dict:
        torch.set_num_threads(threads)
        ids = torch.tensor([prompt])
        with torch.no_grad():
            model(ids[:, :8])
            t, c0 = time.perf_counter(), time.process_time()
            out = model(ids, use_cache=True)
            prefill, c1 = time.perf_counter() - t, time.process_time()
            past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
            t = fastest = time.perf_counter()
            steps = []
            for _ in range(new - 1):
                out = model(tok, past_key_values=past, use_cache=True)
                past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
                steps.append(time.perf_counter() - fastest)
                fastest = time.perf_counter()
            dec, c2 = time.perf_counter() - t, time.process_time()
        return {"prefill_tok_s": len(prompt) / prefill, "decode_tok_s": (new - 1) / dec, "decode_ms_per_token": 1e3 * dec / (new - 1),
                "cpu_prefill_ms": 1e3 * (c1 - c0), "cpu_decode_ms_per_token": 1e3 * (c2 - c1) / (new - 1), "fastest_ms": 1e3 * min(steps)}

    return run


def llamacpp_runner(path: Path, threads: int, n_ctx: int) -> Runner:
    """llama.cpp on the same file: prefill = one ``eval`` of the prompt, decode = one ``eval`` per token with a
    greedy argmax of the last logits row (as rlx's loop does); wall time and llama.cpp's own perf counters."""
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(path), n_ctx=max(256, n_ctx), n_threads=threads, n_threads_batch=threads,
                          n_batch=512, logits_all=False, verbose=False)
    ctx, vocab = llm._ctx.ctx, llm.n_vocab()

    def last_logits() -> np.ndarray:
        return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(vocab,))

    def run(prompt: list[int], new: int) -> dict:
        llm.reset()
        llm.eval(prompt[:8])  # warm-up
        llm.reset()
        llama_cpp.llama_perf_context_reset(ctx)
        t, c0 = time.perf_counter(), time.process_time()
        llm.eval(prompt)
        tok = int(np.argmax(last_logits()))
        prefill, c1 = time.perf_counter() - t, time.process_time()
        toks, steps = [tok], []
        t = mark = time.perf_counter()
        for _ in range(new - 1):
            llm.eval([tok])
            tok = int(np.argmax(last_logits()))
            toks.append(tok)
            steps.append(time.perf_counter() - mark)
            mark = time.perf_counter()
        dec, c2 = time.perf_counter() - t, time.process_time()
        perf = llama_cpp.llama_perf_context(ctx)
        return {"prefill_tok_s": len(prompt) / prefill, "decode_tok_s": (new - 1) / dec, "decode_ms_per_token": 1e3 * dec / (new - 1),
                "cpu_prefill_ms": 1e3 * (c1 - c0), "cpu_decode_ms_per_token": 1e3 * (c2 - c1) / (new - 1),
                "perf_eval_ms_per_token": perf.t_eval_ms / max(perf.n_eval, 1), "tokens": toks, "fastest_ms": 1e3 * min(steps)}

    return run


def profile_openvino(path: Path, threads: int, prompt: list[int], new: int, int8: bool, runs: int = 40) -> list[tuple[str, int, float]]:
    """Where one OpenVINO decode step's time goes: (node type, count, us) from OpenVINO's per-node counters, each
    node's minimum over ``runs`` runs of the step (the figure a shared machine distorts least), largest first."""
    from rlx.llm import load_gguf
    from rlx.llm.model import CAPACITY_BUCKETS

    model = load_gguf(path, backend="openvino", int8_activations=int8, threads=threads, config={"PERF_COUNT": "YES"})
    model.generate(prompt, max_new_tokens=new, stop=[])  # the request now holds the last step's inputs
    capacity = next(b for b in CAPACITY_BUCKETS if b >= len(prompt) + new)
    request = model.decode_executable(capacity).session().request()[0]
    mins: dict[tuple[str, str], float] = {}
    for _ in range(runs):
        request.infer()
        for p in request.get_profiling_info():
            if p.status.name == "EXECUTED":
                key = (p.node_name, p.node_type)
                mins[key] = min(mins.get(key, float("inf")), p.real_time.total_seconds() * 1e6)
    by: dict[str, list[float]] = {}
    for (_, kind), us in mins.items():
        by.setdefault(kind, []).append(us)
    return sorted(((k, len(v), sum(v)) for k, v in by.items()), key=lambda r: -r[2])


def interleaved(runners: dict[str, Runner], rounds: int, prompt: list[int], new: int) -> dict[str, dict]:
    """``rounds`` rounds of every runner, the order rotated each round; per engine its median round by decode time,
    with the best prefill and the fastest single token of all its rounds."""
    names, got = list(runners), {name: [] for name in runners}
    for r in range(max(rounds, 1)):
        for name in names[r % len(names):] + names[:r % len(names)]:
            got[name].append(runners[name](prompt, new))
    out = {}
    for name, rows in got.items():
        rows.sort(key=lambda row: row["decode_ms_per_token"])
        out[name] = {**rows[(len(rows) - 1) // 2], "prefill_tok_s": max(row["prefill_tok_s"] for row in rows),
                     "fastest_ms": min(row["fastest_ms"] for row in rows)}
    return out


def tables(rows: list[dict], bws: dict[int, float]) -> str:
    """One markdown table per thread count: rlx against llama.cpp (decode ratios: wall tokens/s, fastest token, and
    CPU time per token, the figure a shared machine distorts least), the bandwidth bound and transformers eager
    (prefill ratio)."""
    out = []
    for threads in sorted({r["threads"] for r in rows}):
        out += [f"\nthreads={threads} (memory bandwidth at {threads} thread(s) {bws[threads] / 1e9:.1f} GB/s)\n",
                "| type | engine | prefill tok/s | decode tok/s | ms / token | fastest token ms | CPU ms / token | x bound "
                "| decode / llama.cpp | fastest / llama.cpp's | CPU: llama.cpp's / this | prefill / transformers |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in (r for r in rows if r["threads"] == threads):
            peers = {p["engine"]: p for p in rows if p["threads"] == threads and p["type"] == r["type"]}
            lc, hf = peers.get("llama.cpp"), peers.get("transformers-eager")
            bound = r.get("bound_ms_per_token")
            nan = float("nan")
            out.append(f"| {r['type']} | {r['engine']} | {r['prefill_tok_s']:.0f} | {r['decode_tok_s']:.1f} | "
                       f"{r['decode_ms_per_token']:.2f} | {r['fastest_ms']:.2f} | {r['cpu_decode_ms_per_token']:.2f} | "
                       f"{r['decode_ms_per_token'] / bound if bound else nan:.2f} | "
                       f"{r['decode_tok_s'] / lc['decode_tok_s'] if lc else nan:.2f} | "
                       f"{lc['fastest_ms'] / r['fastest_ms'] if lc else nan:.2f} | "
                       f"{lc['cpu_decode_ms_per_token'] / r['cpu_decode_ms_per_token'] if lc else nan:.2f} | "
                       f"{r['prefill_tok_s'] / hf['prefill_tok_s'] if hf else nan:.2f} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--types", default="F16,Q8_0,Q4_0")
    ap.add_argument("--threads", default=f"1,{os.cpu_count()}")
    ap.add_argument("--backends", default="onnxruntime,openvino" if importlib.util.find_spec("openvino") else "onnxruntime")
    ap.add_argument("--modes", default="exact,int8x", help="rlx paths for Q4_0 / Q8_0: exact, int8x")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--no-transformers", action="store_true")
    ap.add_argument("--no-llamacpp", action="store_true")
    ap.add_argument("--dir", default=None, help="keep the GGUF files here (reused when present)")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    ap.add_argument("--profile", action="store_true", help="also print the openvino int8x decode step's time per node type")
    ap.add_argument("--ov-configs", default="", help="extra openvino rows: NAME=JSON;NAME=JSON (CPU properties, e.g. "
                    "'nopin={\"ENABLE_CPU_PINNING\": \"NO\"}'), run interleaved with the default one")
    args = ap.parse_args()
    ov_configs = [(name, json.loads(cfg)) for name, _, cfg in (item.partition("=") for item in args.ov_configs.split(";") if item)]
    from gguf_models import write_model

    try:
        import llama_cpp  # noqa: F401
        have_llamacpp = not args.no_llamacpp
    except ImportError:
        print("llama-cpp-python: not installed (build it from source to compare)")
        have_llamacpp = False
    bws = {threads: bandwidth(threads) for threads in map(int, args.threads.split(","))}
    print("memory bandwidth (NumPy copy, read + write): " + ", ".join(f"{bw / 1e9:.1f} GB/s at {t} thread(s)" for t, bw in bws.items())
          + f"; load average {os.getloadavg()[0]:.1f}")
    prompt = [int(t) for t in np.random.default_rng(0).integers(3, SHAPE["vocab"], args.prompt)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.dir or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for qtype in args.types.split(","):
            path = folder / f"llama100m_{qtype}.gguf"
            if not path.exists():
                t = time.perf_counter()
                write_model(path, qtype=qtype, **SHAPE)
                print(f"\n{qtype}: wrote {path.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - t:.0f} s")
            for threads in map(int, args.threads.split(",")):
                run = (path, threads, prompt, args.new)

                def add(engine: str, r: dict, qtype: str = qtype, threads: int = threads) -> None:
                    rows.append({"type": qtype, "threads": threads, "engine": engine, **r})
                    extra = f", bound {r['bound_ms_per_token']:.2f} ms" if "bound_ms_per_token" in r else ""
                    print(f"  {engine:24s} threads={threads}: prefill {r['prefill_tok_s']:7.1f} tok/s, decode "
                          f"{r['decode_tok_s']:6.1f} tok/s ({r['decode_ms_per_token']:.2f} ms/token; CPU "
                          f"{r['cpu_decode_ms_per_token']:.2f} ms/token{extra}, fastest token {r['fastest_ms']:.2f} ms); "
                          f"load {os.getloadavg()[0]:.1f}", flush=True)

                runners: dict[str, Runner] = {}
                if have_llamacpp:
                    runners["llama.cpp"] = llamacpp_runner(path, threads, len(prompt) + args.new)
                for backend in args.backends.split(","):
                    modes = args.modes.split(",") if qtype in ("Q8_0", "Q4_0") else ["exact"]
                    for mode in modes:
                        for label, cfg in [("", None), *ov_configs] if backend == "openvino" else [("", None)]:
                            name = f"rlx-{backend}" + ("-int8x" if mode == "int8x" else "") + (f"-{label}" if label else "")
                            runners[name] = rlx_runner(path, threads, prompt, backend, mode == "int8x", cfg)
                if not args.no_transformers:
                    runners["transformers-eager"] = transformers_runner(path, threads)
                for engine, r in interleaved(runners, args.rounds, prompt, args.new).items():
                    if "weight_bytes" in r:
                        r["bound_ms_per_token"] = 1e3 * r["weight_bytes"] / bws[threads]
                    add(engine, r)
                del runners  # the engines' sessions and weights, before the next thread count's
                if args.profile and qtype in ("Q8_0", "Q4_0") and importlib.util.find_spec("openvino"):
                    table = profile_openvino(*run, int8=True)
                    print(f"  openvino int8x decode step, threads={threads} (per-node minimum over 40 runs): "
                          f"{sum(us for _, _, us in table):.0f} us in nodes; " + ", ".join(f"{k} x{n} {us:.0f}" for k, n, us in table))
    print(tables(rows, bws))
    if args.json:
        Path(args.json).write_text(json.dumps({"bandwidth_Bps": {str(t): bw for t, bw in bws.items()}, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
