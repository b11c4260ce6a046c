"""Cost of the ONNX export's NaN-propagating max / min pooling (docs/semantics.md "Edge cases").

Builds each model's ONNX three times -- the onnxruntime backend's export as it is ("guarded": MaxPool plus the NaN
term, for a relu's output a unit-weight depthwise Conv with a fused Clip(0, 0)), the same with the relu analysis off
("general": a zero-weight depthwise Conv over HardSigmoid(x)) and with the bare MaxPool -- and times the sessions
interleaved (the order reversed every round), reporting medians and the ratios to bare. It also counts the layout
reorders onnxruntime inserts (ReorderInput / ReorderOutput), which an IsNaN-based guard adds.
Run: PYTHONPATH=src python scripts/pool_nan_cost.py [--rounds 30] [--threads 1]. Indicative on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np


def _general_pool(ex, node, ins):
    """The export with the relu analysis off: every max pool gets the general (bounding) NaN term."""
    from rlx.backends.onnx import export_pool

    kept = export_pool.nonneg
    export_pool.nonneg = lambda ex, vid: False
    try:
        return GUARDED(ex, node, ins)
    finally:
        export_pool.nonneg = kept


def _bare_pool(ex, node, ins):
    """The export without the NaN term (what it was before): MaxPool, min as -MaxPool(-x)."""
    a = node.attrs
    k, s, p = list(a["kernel_size"]), list(a["stride"]), list(a["padding"])
    geo = {"kernel_shape": k, "strides": s, "pads": [p[0], p[1], p[0], p[1]]}
    if a["kind"] == "max":
        return ex.node("MaxPool", [ins[0]], **geo)
    if a["kind"] == "min":
        return ex.node("Neg", [ex.node("MaxPool", [ex.node("Neg", [ins[0]])], **geo)])
    return GUARDED(ex, node, ins)


def _resnet18():
    """ResNet-18 (He et al.; torchvision's layout), random init: written out because timm / torchvision
    may not import beside the installed torch."""
    from torch import nn

    def block(cin, cout, stride):
        down = None if stride == 1 and cin == cout else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                                                       nn.BatchNorm2d(cout))
        return Basic(cin, cout, stride, down)

    class Basic(nn.Module):
        def __init__(self, cin, cout, stride, down):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
            self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
            self.down = down

        def forward(self, x):
            y = self.b2(self.c2(self.b1(self.c1(x)).relu()))
            return (y + (x if self.down is None else self.down(x))).relu()

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [block(cin, cout, stride), block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 100)]
    return nn.Sequential(*layers).eval()


def _models():
    import torch

    import rlx.torch

    torch.manual_seed(0)
    out = {}
    for size in (112, 224):
        g, params = rlx.torch.import_module(_resnet18(), (torch.randn(1, 3, size, size),))
        out[f"resnet18 {size}²"] = (g, params)
    import rlx

    for relu in (False, True):  # a pooling microbench: one 3x3 / stride-2 max pool over 64 x 112 x 112
        pg = rlx.Graph("pool")
        x = pg.input("x", (1, 64, 112, 112))
        pg.set_outputs([pg.pool2d(pg.relu(x) if relu else x, kind="max", kernel_size=[3, 3], stride=[2, 2],
                                  padding=[1, 1])])
        out[f"max_pool2d 3x3/2 on {'relu of ' if relu else ''}1x64x112x112"] = (pg, {})
    return out


def _session(model, threads: int, optimized: str | None = None):
    import onnxruntime as ort

    from rlx.backends.ort_backend import SLOW_CPU_FUSIONS

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    if optimized:
        so.optimized_model_filepath = optimized
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"],
                                disabled_optimizers=list(SLOW_CPU_FUSIONS))


def _reorders(model, threads: int) -> int:
    import onnx

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "opt.onnx")
        _session(model, threads, path)
        return sum(n.op_type.startswith("Reorder") for n in onnx.load(path).graph.node)


def _time(sess, feed, n: int = 3) -> float:
    t = time.perf_counter()
    for _ in range(n):
        sess.run(None, feed)
    return (time.perf_counter() - t) / n


def main() -> None:
    global GUARDED
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    from rlx.backends.onnx.exporter import EXPORTERS
    from rlx.backends.ort_backend import export_for_session

    GUARDED = EXPORTERS["pool2d"]
    print(f"load {os.getloadavg()[0]:.1f}, {args.threads} thread(s), {args.rounds} interleaved rounds")
    for name, (g, params) in _models().items():
        models = {}
        for label, fn in (("guarded", GUARDED), ("general", _general_pool), ("bare", _bare_pool)):
            EXPORTERS["pool2d"] = fn
            models[label] = export_for_session(g, params, engine="onnxruntime")  # what the onnxruntime backend runs
        EXPORTERS["pool2d"] = GUARDED
        sess = {k: _session(m, args.threads) for k, m in models.items()}
        inp = models["guarded"].graph.input[0]
        shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        feeds = {inp.name: np.random.default_rng(1).standard_normal(shape).astype(np.float32)}
        got = {k: s.run(None, feeds)[0] for k, s in sess.items()}
        assert all(np.allclose(got[k], got["bare"], rtol=1e-5, atol=1e-5) for k in got), name
        for s in sess.values():
            _time(s, feeds, 3)  # warm
        ts: dict[str, list[float]] = {k: [] for k in sess}
        for r in range(args.rounds):
            for k in (list(sess) if r % 2 == 0 else list(sess)[::-1]):
                ts[k].append(_time(sess[k], feeds))
        med = {k: statistics.median(v) for k, v in ts.items()}
        ro = {k: _reorders(m, args.threads) for k, m in models.items()}
        print(f"{name}: bare {med['bare'] * 1e3:.3f} ms, guarded {med['guarded'] * 1e3:.3f} ms "
              f"(x{med['guarded'] / med['bare']:.3f}), general {med['general'] * 1e3:.3f} ms "
              f"(x{med['general'] / med['bare']:.3f}); layout reorders {ro}")
    print(f"load after {os.getloadavg()[0]:.1f}")


GUARDED = None

if __name__ == "__main__":
    main()
