"""A/B of the torch backend's direct calls (rlx.backends.torch_backend.direct): the eager module with them
(B) against the same module with every node through its lowering's wrapper (A, as before them), on a
tiny graph and real models, 1 thread.

Run: .venv/bin/python benchmarks/torch_direct_ab.py [--repeat 11] [--only NAME]

Both executables are built in this process from the same graph and params (A with ``direct_call``
answering None while it is built); outputs are checked against ``rlx.run`` first. Interleaved rounds,
process CPU time per ``exe.run(feed)`` (medians). Models (random init): ``relu(x * s)`` x [1, 8]; the
pre-norm transformer layer of ``backends_peers.py``; ``models_peers.py``'s ResNet-style CNN, ViT and
GPT-style decoder; timm MobileNetV3-S (112²); transformers BERT and Llama (hidden 256, 4 layers, 128 tokens).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import REPO_DIR, calls_for, measure, print_footer, print_header, print_table  # noqa: E402

import rlx  # noqa: E402
import rlx.torch  # noqa: E402
from rlx.backends.torch_backend import executable as E  # noqa: E402


def tiny():
    g = rlx.Graph("tiny")
    x = g.input("x", (1, 8))
    g.set_outputs([g.relu(x * g.param("s", (8,)))])
    rng = np.random.default_rng(0)
    return g, {"x": rng.standard_normal((1, 8)).astype(np.float32)}, {"s": rng.standard_normal(8).astype(np.float32)}


def transformer_layer():
    from exec_speed_jax import transformer

    w = transformer("f32", np.random.default_rng(0))
    return w.graph, w.inputs, w.params


def _imported(table: str, key: str):
    def build():
        sys.path.insert(0, os.path.join(REPO_DIR, "tests"))
        import models_peers

        import models.zoo  # noqa: F401  (the torchvision op schemas timm / transformers need)

        module, args, kwargs = getattr(models_peers, table)[key]()
        g, params = rlx.torch.import_module(module.eval(), args, kwargs=kwargs)
        return g, {n: t.numpy() for n, t in zip(g.inputs(), [*args, *kwargs.values()])}, params

    return build


MODELS = {"tiny relu(x * s)": tiny, "transformer layer": transformer_layer,
          "resnet-ish 112²": _imported("SHAPES", "resnet-ish 112²"), "vit 224² d192 l4": _imported("SHAPES", "vit 224² d192 l4"),
          "gpt d256 l4 s128": _imported("SHAPES", "gpt d256 l4 s128"),
          "timm mobilenetv3_small_100 112²": _imported("REAL", "timm mobilenetv3_small_100 112²"),
          "hf bert h256 l4 s128": _imported("REAL", "hf bert h256 l4 s128"),
          "hf llama h256 l4 s128": _imported("REAL", "hf llama h256 l4 s128")}


def wrapped(g: rlx.Graph, params: dict) -> rlx.Executable:
    """The eager executable with no direct call (every node through its lowering's wrapper)."""
    real = E.direct_call
    E.direct_call = lambda *args, **kwargs: None
    try:
        return rlx.compile(g, backend="torch", params=params)
    finally:
        E.direct_call = real


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--only", default=None, help="run the models whose name contains this")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print_header("torch backend: direct calls (B) vs lowering wrappers (A), eager, 1 thread")
    rows = []
    for name, make in MODELS.items():
        if args.only and args.only not in name:
            continue
        g, feed, params = make()
        b, a = rlx.compile(g, backend="torch", params=params), wrapped(g, params)
        want = rlx.run(g, feed, params)[0]
        for exe in (a, b):
            np.testing.assert_allclose(exe.run(feed)[0], want, rtol=1e-3, atol=1e-4)
        calls = [n for n in b.module.graph.nodes if n.op == "call_function"]
        direct = sum(1 for n in calls if not n.target.__module__.startswith("rlx."))
        fns = {"A": lambda a=a, feed=feed: a.run(feed), "B": lambda b=b, feed=feed: b.run(feed)}
        number = min(calls_for(f, 0.02, cap=20000) for f in fns.values())
        t = measure(fns, repeat=args.repeat, number=number)
        ta, tb = t["A"].median_cpu, t["B"].median_cpu
        rows.append([name, f"{direct}/{len(calls)}", f"{ta * 1e6:.2f}", f"{tb * 1e6:.2f}", f"{tb / ta:.3f}"])
        print(" | ".join(rows[-1]), file=sys.stderr)
    print_table(["model", "direct fx calls", "A wrappers (µs)", "B direct (µs)", "B / A"], rows)
    print_footer()


if __name__ == "__main__":
    main()
