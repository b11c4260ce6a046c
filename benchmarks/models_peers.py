"""Real-model shapes through ``rlx.torch.import_module``: every rlx backend vs torch eager, and the
numpy executor vs the reference interpreter (``rlx.run``), in one run.

Run: .venv/bin/python benchmarks/models_peers.py [--threads N] [--repeat 5] [--only NAME]

The models are written here with ``torch.nn`` (random init, eval mode; timm / transformers do not
import in this environment: their torchvision dependency is broken): a ResNet-style CNN (conv-BN-ReLU
stem, 4 basic blocks, global pool, linear head; 1x3x112x112), an MLP-Mixer (224², patch 16, D=256,
4 layers), a ViT encoder (224², patch 16, D=192, 3 heads, 4 layers), a GPT-style causal decoder
(token + position embeddings, D=256, 4 heads, 4 layers, 128 tokens) and a 4-layer MLP (batch 64).

Contenders, NumPy in / NumPy out: ``rlx.run`` (the reference interpreter); ``rlx numpy``
(``rlx.compile`` defaults: kernels without ``kernel_into`` adopt their fresh result, weight-only
nodes computed once when params are bound) and ``rlx numpy slots`` (``adopt=False,
fold_weights=False``: every node in its planned slot, every node on every run, as before); ``rlx torch`` (eager fx module);
``rlx onnxruntime``; and the torch module itself under ``torch.inference_mode()``. Medians of
interleaved rounds, process CPU time per call; ratios against torch eager and (numpy rows)
against ``rlx.run``. Dispatch overhead per node = (exe.run - the sum of its steps run bare) / steps.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from exec_peers import _threads

THREADS = _threads(sys.argv) or os.cpu_count() or 1
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(THREADS)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import calls_for, measure, print_footer, print_header, print_table  # noqa: E402
from torch import nn  # noqa: E402

import rlx  # noqa: E402
import rlx.torch  # noqa: E402


class Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        same = stride == 1 and cin == cout
        self.down = None if same else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNetish(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.blocks = nn.Sequential(Block(32, 32, 1), Block(32, 64, 2), Block(64, 128, 2), Block(128, 128, 1))
        self.head = nn.Linear(128, 100)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))


class Attention(nn.Module):
    def __init__(self, d: int, heads: int, causal: bool):
        super().__init__()
        self.qkv, self.proj, self.heads, self.causal = nn.Linear(d, 3 * d), nn.Linear(d, d), heads, causal

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).reshape(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        return self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=self.causal).transpose(1, 2).reshape(b, s, d))


class EncoderLayer(nn.Module):
    def __init__(self, d: int, heads: int, causal: bool = False):
        super().__init__()
        self.n1, self.att, self.n2 = nn.LayerNorm(d), Attention(d, heads, causal), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.att(self.n1(x))
        return x + self.mlp(self.n2(x))


class ViTish(nn.Module):
    def __init__(self, d: int = 192, heads: int = 3, layers: int = 4):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 16, 16)
        self.pos = nn.Parameter(torch.randn(1, 196, d) * 0.02)
        self.layers = nn.Sequential(*[EncoderLayer(d, heads) for _ in range(layers)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 1000)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2) + self.pos
        return self.head(self.norm(self.layers(x)).mean(dim=1))


class MixerLayer(nn.Module):
    def __init__(self, tokens: int, d: int):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.tok = nn.Sequential(nn.Linear(tokens, 128), nn.GELU(), nn.Linear(128, tokens))
        self.ch = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.tok(self.n1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.ch(self.n2(x))


class Mixer(nn.Module):
    def __init__(self, d: int = 256, layers: int = 4):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 16, 16)
        self.layers = nn.Sequential(*[MixerLayer(196, d) for _ in range(layers)])
        self.head = nn.Linear(d, 1000)

    def forward(self, x):
        return self.head(self.layers(self.patch(x).flatten(2).transpose(1, 2)).mean(dim=1))


class GPTish(nn.Module):
    def __init__(self, vocab: int = 1000, d: int = 256, heads: int = 4, layers: int = 4, seq: int = 128):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.randn(1, seq, d) * 0.02)
        self.layers = nn.Sequential(*[EncoderLayer(d, heads, causal=True) for _ in range(layers)])
        self.norm, self.out = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        return self.out(self.norm(self.layers(self.tok(ids) + self.pos)))


def mlp():
    return nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


MODELS = {
    "resnet-ish 112²": (ResNetish, lambda: torch.randn(1, 3, 112, 112)),
    "mlp-mixer 224² d256 l4": (Mixer, lambda: torch.randn(1, 3, 224, 224)),
    "vit 224² d192 l4": (ViTish, lambda: torch.randn(1, 3, 224, 224)),
    "gpt d256 l4 s128": (GPTish, lambda: torch.randint(0, 1000, (1, 128))),
    "mlp 4 layers b64": (mlp, lambda: torch.randn(64, 512)),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    print_header("real-model shapes: rlx backends vs torch eager, numpy executor vs rlx.run (models_peers.py)",
                 f"torch {torch.__version__}; threads = {THREADS}; medians of {args.repeat} interleaved rounds, process CPU time per call")
    rows, vs_torch, vs_ref = [], {}, {}
    for name, (make, example) in MODELS.items():
        if args.only and args.only not in name:
            continue
        module, x = make().eval(), example()
        g, params = rlx.torch.import_module(module, (x,))
        (in_name,) = g.inputs()
        feed = {in_name: x.numpy()}
        exes = {
            "rlx numpy": rlx.compile(g, params=params),
            "rlx numpy slots": rlx.compile(g, params=params, adopt=False, fold_weights=False),
            "rlx torch": rlx.compile(g, backend="torch", params=params),
            "rlx onnxruntime": rlx.compile(g, backend="onnxruntime", params=params, threads=THREADS),
        }
        exe = exes["rlx numpy"]
        fns = {"rlx.run": lambda g=g, feed=feed, params=params: rlx.run(g, feed, params)[0]}
        fns.update({k: (lambda e=e, feed=feed: e.run(feed)[0]) for k, e in exes.items()})

        def eager(module=module, x=x):
            with torch.inference_mode():
                return module(x).numpy()

        fns["torch eager"] = eager
        ref = fns["rlx.run"]()
        errs = {k: float(np.max(np.abs(f() - ref)) / (np.max(np.abs(ref)) + 1e-30)) for k, f in fns.items()}
        number = min(calls_for(f, 0.05) for f in fns.values())
        t = measure(fns, args.repeat, number=number, gc_off=False, warmup=True)
        ms = {k: v.median_cpu * 1e3 for k, v in t.items()}
        steps = exe._steps

        def bare(steps=steps):
            for s in steps:
                s()

        bare_ms = measure({"b": bare}, args.repeat, number=number, gc_off=False)["b"].median_cpu * 1e3
        per_node_us = (ms["rlx numpy"] - bare_ms) / max(len(steps), 1) * 1e3
        for k in fns:
            vs_torch.setdefault(k, []).append(ms[k] / ms["torch eager"])
        for k in ("rlx numpy", "rlx numpy slots"):
            vs_ref.setdefault(k, []).append(ms[k] / ms["rlx.run"])
        rows.append([name, len(g), *(ms[k] for k in fns), ms["rlx numpy"] / ms["rlx.run"], ms["rlx torch"] / ms["torch eager"],
                     ms["rlx onnxruntime"] / ms["torch eager"], per_node_us, f"{max(errs.values()):.1e}"])
        print(f"  {name}: done", file=sys.stderr, flush=True)
    print_table(["model", "nodes", *(f"{k} ms" for k in fns), "numpy / rlx.run", "rlx torch / eager", "rlx ort / eager",
                 "dispatch us/node", "max rel err"], rows)
    def geomean(v):
        return math.exp(sum(map(math.log, v)) / len(v))

    geo = [[k, geomean(v), geomean(vs_ref[k]) if k in vs_ref else float("nan")] for k, v in vs_torch.items()]
    print_table(["contender", "geomean / torch eager", "geomean / rlx.run"], geo, title="geometric means")
    print_footer()


if __name__ == "__main__":
    main()
