"""Training steps per second: rlx (numpy, jax, torch engines) against torch eager and
``torch.compile`` on the same GPT-2 language model, with 1 thread and with all threads.

    python benchmarks/training.py                 # both thread settings, each in its own process
    python benchmarks/training.py --threads 1     # one setting, this process
    python benchmarks/training.py --quick         # a smoke run (few steps)

Every contender trains the same model (random init) with AdamW on the same batch; one sample is
``--steps`` optimizer steps, the contenders take turns (common.measure), and the table shows
the median steps per second by wall clock and by process CPU time (on a loaded machine the CPU
figure is the fairer one). Thread counts are fixed before the libraries load: BLAS / OpenMP
environment variables, ``torch.set_num_threads``, and XLA's CPU flags for jax.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _threads(argv: list[str]) -> int | None:
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return None


THREADS = _threads(sys.argv)
if THREADS is not None:  # before NumPy, torch and jax load
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = str(THREADS)
    if THREADS == 1:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()

from common import REPO_DIR, measure, print_footer, print_header, print_table  # noqa: E402

CONTENDERS = ["rlx numpy", "rlx jax", "rlx torch", "torch eager", "torch.compile"]


def _model(args):
    """The example's GPT-2 language-model module (examples/finetune_gpt2.py) and one batch of ids."""
    import torch

    sys.path.insert(0, os.path.join(REPO_DIR, "tests", "models"))
    sys.path.insert(0, os.path.join(REPO_DIR, "examples"))
    import zoo  # noqa: F401  (makes torchvision, hence transformers, importable here)
    from finetune_gpt2 import build_model

    torch.manual_seed(0)
    module = build_model(args.vocab, args.seq, args.width, args.layers)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), generator=torch.Generator().manual_seed(1))
    return module, ids


def _torch_step(module, compiled: bool):
    import torch

    module = copy.deepcopy(module)
    fn = torch.compile(module) if compiled else module
    opt = torch.optim.AdamW(module.parameters(), lr=1e-3)

    def step(ids):
        opt.zero_grad()
        loss = fn(ids)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def run_one(args) -> dict:
    """Steps per second of every contender at this process's thread count."""
    import torch

    import rlx

    torch.set_num_threads(THREADS or os.cpu_count() or 1)
    module, ids = _model(args)
    graph, params = rlx.torch.import_module(copy.deepcopy(module), (ids,))
    feed = {next(iter(graph.inputs())): ids.numpy()}
    steps = {}
    for backend in ("numpy", "jax", "torch"):
        trainer = rlx.compile_training(graph, optimizer="adamw", lr=1e-3, params=params, backend=backend)
        steps[f"rlx {backend}"] = lambda t=trainer: t.step(feed)
    eager, compiled = _torch_step(module, False), _torch_step(module, True)
    steps["torch eager"] = lambda: eager(ids)
    steps["torch.compile"] = lambda: compiled(ids)
    for fn in steps.values():  # warm up: jit / torch.compile builds, first-call checks
        fn()
        fn()
    timings = measure({k: v for k, v in steps.items()}, repeat=args.repeat, number=args.steps)
    return {k: {"wall": 1.0 / t.median_wall, "cpu": 1.0 / t.median_cpu} for k, t in timings.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, help="one thread setting in this process (default: 1 and all, in children)")
    ap.add_argument("--repeat", type=int, default=5, help="interleaved rounds; medians are reported")
    ap.add_argument("--steps", type=int, default=5, help="optimizer steps per sample")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="2 rounds of 2 steps")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # child mode: print the figures as JSON
    args = ap.parse_args()
    if args.quick:
        args.repeat, args.steps = 2, 2
    if args.threads is not None:
        result = run_one(args)
        if args.json:
            print("RESULT " + json.dumps(result))
            return
        results = {args.threads: result}
    else:
        results = {}
        for n in sorted({1, os.cpu_count() or 1}):
            argv = [sys.executable, os.path.abspath(__file__), "--threads", str(n), "--json",
                    *[a for a in sys.argv[1:] if not a.startswith("--threads")]]
            out = subprocess.run(argv, capture_output=True, text=True, check=False)
            line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                raise SystemExit(f"the {n}-thread run failed:\n{out.stderr[-3000:]}")
            results[n] = json.loads(line[len("RESULT "):])
    print_header("Training steps per second (GPT-2 LM, AdamW)",
                 f"batch {args.batch} x {args.seq} tokens, width {args.width}, {args.layers} layers, vocab {args.vocab}; "
                 f"{args.repeat} rounds of {args.steps} steps")
    rows = []
    for n, res in results.items():
        eager = res["torch eager"]
        for name in CONTENDERS:
            r = res[name]
            rows.append([f"{n} thread{'s' if n > 1 else ''}", name, r["wall"], r["cpu"], r["cpu"] / eager["cpu"]])
    print_table(["threads", "contender", "steps/s (wall)", "steps/s (CPU)", "x torch eager (CPU)"], rows)
    print_footer()


if __name__ == "__main__":
    main()
