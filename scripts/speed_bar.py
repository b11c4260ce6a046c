"""Issue #33's speed bar: the rlx figures of benchmarks/README.md must not regress by more than 3%
against the code before the architecture step, as same-run ratios.

The base is the parent of the first architecture commit (b267f0a "architecture: readers move to
rlx.frontends"): 54f45eb. Its ``src/`` and ``benchmarks/`` are extracted with ``git archive`` into a
temporary folder (no worktree is touched), and two child processes -- one importing the base's rlx,
one this checkout's -- build the same contenders: the four kernels of benchmarks/exec_speed_jax.py
(matmul+gelu, layer_norm, attention, transformer layer; f32) on the numpy, onnxruntime and torch
backends, and real models through ``rlx.torch.import_module`` (ResNet-18 112² of
scripts/pool_nan_cost.py, a BERT and a GPT-2 of
benchmarks/models_peers.py's sizes) on onnxruntime, torch and numpy. Each child builds its contenders
with its own version's code; the parent then asks them in turn to time a batch of calls (about 20 ms,
the same count for both), alternating which goes first every round, so both versions see the same
machine state. It reports per contender the medians and the ratio now / base (> 1.03: a regression)
and the geomean.

Run: PYTHONPATH=src python scripts/speed_bar.py [--base 54f45eb] [--now REV] [--rounds 15] [--threads 1] [--only SUBSTR]
(``--now 54f45eb`` times the base against itself: the spread of those ratios is the run's noise.)
Shared machines give noisy absolute times; the interleaved ratio is the figure to read (say the load).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

BASE = "54f45eb"  # parent of b267f0a, the first commit of the architecture step (#33)
ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------ child side
def _kernels(bench: str) -> dict:
    import numpy as np

    sys.path.insert(0, bench)
    from exec_speed_jax import WORKLOADS

    out = {}
    for make in WORKLOADS:
        w = make("f32", np.random.default_rng(0))
        for backend in ("numpy", "onnxruntime", "torch"):
            out[f"kernel {w.name} / {backend}"] = (w.graph, w.params, w.inputs, backend)
    return out


def _torchvision_importable() -> None:
    """transformers imports torchvision, whose CUDA wheel beside a CPU torch fails on registering fake
    kernels for torchvision::nms / qnms; declaring the two schemas lets it import (tests/models/zoo.py)."""
    import torch

    try:
        import torchvision  # noqa: F401
        return
    except ImportError:
        return
    except RuntimeError as exc:
        if "torchvision::nms" not in str(exc):
            raise
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    global _TV
    _TV = torch.library.Library("torchvision", "FRAGMENT")
    for op in ("nms", "qnms"):
        _TV.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")


_TV = None


def _models() -> dict:
    import torch

    _torchvision_importable()
    import transformers
    from pool_nan_cost import _resnet18

    import rlx.torch

    torch.manual_seed(0)
    hf = {"vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
          "intermediate_size": 1024, "max_position_embeddings": 128}
    built = {
        "resnet18 112²": (_resnet18(), {"x": torch.randn(1, 3, 112, 112)}),
        "hf bert h256 l4 s128": (transformers.BertModel(transformers.BertConfig(**hf)),
                                 {"input_ids": torch.randint(0, 1000, (1, 128))}),
        "hf gpt2 h256 l4 s128": (transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=1000, n_embd=256, n_layer=4, n_head=4, n_positions=128)), {"input_ids": torch.randint(0, 1000, (1, 128))}),
    }
    out = {}
    for name, (module, feed) in built.items():
        module.eval()
        if hasattr(module, "config"):
            module.config.use_cache = False
        args = tuple(feed.values()) if name.startswith("resnet") else ()
        kwargs = {} if args else feed
        g, params = rlx.torch.import_module(module, args, kwargs=kwargs) if kwargs else rlx.torch.import_module(module, args)
        inputs = dict(zip(g.inputs(), (t.numpy() for t in feed.values())))  # names in node order
        for backend in ("onnxruntime", "torch", "numpy"):
            out[f"model {name} / {backend}"] = (g, params, inputs, backend)
    return out


def child(src: str, bench: str, threads: int, only: str) -> None:
    """Build every contender with the rlx under ``src``, then time batches on request (JSON lines)."""
    sys.path[:0] = [src, str(ROOT / "scripts")]
    import numpy as np
    import torch

    import rlx

    out = os.fdopen(os.dup(1), "w")  # the protocol's channel; anything a library prints goes to stderr
    os.dup2(2, 1)
    torch.set_num_threads(threads)
    specs = {**_kernels(bench), **({} if only.startswith("kernel") else _models())}
    exes = {}
    for name, (g, params, inputs, backend) in specs.items():
        if only and only not in name:
            continue
        opts = {"threads": threads} if backend == "onnxruntime" else {}
        exe = rlx.compile(g, backend=backend, params=params, **opts)
        feed = {k: np.ascontiguousarray(v) for k, v in inputs.items()}
        exe.run(feed)
        exes[name] = (exe, feed)
    print(json.dumps({"ready": sorted(exes), "rlx": rlx.__file__}), file=out, flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        exe, feed = exes[req["c"]]
        n = req["n"]
        if n == 0:  # calibrate: calls in about 20 ms
            t0 = time.perf_counter()
            exe.run(feed)
            n = max(1, min(2000, int(0.02 / max(time.perf_counter() - t0, 1e-6))))
        t0 = time.perf_counter()
        for _ in range(n):
            exe.run(feed)
        print(json.dumps({"t": (time.perf_counter() - t0) / n, "n": n}), file=out, flush=True)


# ----------------------------------------------------------------------------- parent side
class _Child:
    def __init__(self, src: Path, bench: Path, threads: int, only: str):
        env = {**os.environ, "PYTHONPATH": str(src), **{v: str(threads) for v in
               ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}}
        self.p = subprocess.Popen([sys.executable, __file__, "--child", str(src), str(bench), str(threads), only],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=str(bench))
        assert self.p.stdout is not None
        self.ready = json.loads(self.p.stdout.readline())

    def time(self, name: str, n: int) -> dict:
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.write(json.dumps({"c": name, "n": n}) + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def close(self) -> None:
        if self.p.stdin:
            self.p.stdin.close()
        self.p.wait(timeout=60)


def _extract(rev: str, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    tar = into / f"{rev}.tar"
    with open(tar, "wb") as f:
        subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src", "benchmarks"], stdout=f, check=True)
    with tarfile.open(tar) as t:
        t.extractall(into / rev, filter="data")
    return into / rev


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else "")
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default=BASE)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--now", default="", help="a revision to compare instead of this checkout (--now = --base: the noise)")
    ap.add_argument("--only", default="", help="only contenders whose name contains this")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = _extract(args.base, Path(tmp))
        now = _extract(args.now, Path(tmp) / "now") if args.now else ROOT
        print(f"load {os.getloadavg()[0]:.1f}; base {args.base} vs {args.now or ROOT}; {args.threads} thread(s); "
              f"{args.rounds} interleaved rounds", flush=True)
        old = _Child(base / "src", base / "benchmarks", args.threads, args.only)
        new = _Child(now / "src", now / "benchmarks", args.threads, args.only)
        names = [c for c in new.ready["ready"] if c in old.ready["ready"]]
        counts = {c: new.time(c, 0)["n"] for c in names}
        times: dict[str, dict[str, list[float]]] = {c: {"base": [], "now": []} for c in names}
        for r in range(args.rounds):
            for c in names:
                pair = (("base", old), ("now", new)) if r % 2 == 0 else (("now", new), ("base", old))
                for label, ch in pair:
                    times[c][label].append(ch.time(c, counts[c])["t"])
        old.close()
        new.close()
    ratios = []
    for c in names:
        b, n = statistics.median(times[c]["base"]), statistics.median(times[c]["now"])
        ratios.append(n / b)
        flag = "  REGRESSION" if n / b > 1.03 else ""
        print(f"{c:62s} base {b * 1e3:9.3f} ms  now {n * 1e3:9.3f} ms  now/base {n / b:6.3f}{flag}")
    if ratios:
        print(f"geomean now/base {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f} over {len(ratios)} contenders; "
              f"load after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
