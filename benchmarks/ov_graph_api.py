"""OpenVINO through rlx's ONNX exporter or through OpenVINO's own graph API (issue #38 item 1: "measure which").

The same two blocks built both ways, compiled for the CPU (f32, latency hint, one stream) and timed:

- **transformer layer** (pre-norm, [1, S, D], H heads, GELU MLP): torch module -> ``rlx.torch.import_module`` ->
  the openvino backend's path (:func:`rlx.backends.ort_backend.export_for_session`, ``Core.read_model`` of the
  bytes, ``compile_model``), against the same math written with ``openvino.opset13`` by hand (MVN + affine for
  layer norm, MatMul with the transposed weights, Reshape / Transpose for the heads, Softmax, exact GELU);
- **conv block** (ResNet basic block, inference BatchNorm): the same two routes (by hand: the BatchNorm folded
  into the convolution weights and a bias Add, as rlx's export does).

Compile time: wall time from the rlx graph (or nothing, by hand) to the compiled model, medians of ``--compile``
fresh compiles (the session cache bypassed). Run time: process CPU time per ``infer`` of the compiled model's
own request, medians of ``--repeat`` interleaved rounds; outputs checked against torch first.

Run: .venv/bin/python benchmarks/ov_graph_api.py [--threads 1] [--repeat 9] [--compile 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
import torch
from common import calls_for, load_average, measure, print_table

import rlx
import rlx.torch

S, D, H, F = 128, 256, 4, 1024
C, HW = 64, 28


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        self.qkv, self.out = torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D)
        self.fc1, self.fc2 = torch.nn.Linear(D, F), torch.nn.Linear(F, D)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        heads = [t.reshape(1, S, H, D // H).transpose(1, 2) for t in (q, k, v)]
        a = torch.softmax(heads[0] @ heads[1].transpose(-1, -2) / (D // H) ** 0.5, dim=-1) @ heads[2]
        x = x + self.out(a.transpose(1, 2).reshape(1, S, D))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = torch.nn.Conv2d(C, C, 3, padding=1, bias=False), torch.nn.Conv2d(C, C, 3, padding=1, bias=False)
        self.b1, self.b2 = torch.nn.BatchNorm2d(C), torch.nn.BatchNorm2d(C)
        for bn in (self.b1, self.b2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        return torch.relu(x + self.b2(self.c2(torch.relu(self.b1(self.c1(x))))))


def _props(threads: int) -> dict:
    return {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1",
            "INFERENCE_NUM_THREADS": str(threads)}


def via_exporter(core, g, params, threads: int):
    from rlx.backends.ort_backend import export_for_session

    return core.compile_model(core.read_model(export_for_session(g, params).SerializeToString()), "CPU", _props(threads))


def _c(a) -> object:
    import openvino.opset13 as ops

    return ops.constant(np.ascontiguousarray(a, dtype=np.float32))


def _ln(ops, x, mod):
    y = ops.mvn(x, ops.constant(np.array([-1], np.int64)), True, float(mod.eps), "inside_sqrt")
    return ops.add(ops.multiply(y, _c(mod.weight.detach().numpy())), _c(mod.bias.detach().numpy()))


def _linear(ops, x, mod):
    return ops.add(ops.matmul(x, _c(mod.weight.detach().numpy()), False, True), _c(mod.bias.detach().numpy()))


def layer_by_hand(core, mod: Layer, threads: int):
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([1, S, D], np.float32, name="x")
    qkv = _linear(ops, _ln(ops, x, mod.ln1), mod.qkv)
    q, k, v = ops.split(qkv, ops.constant(np.int64(-1)), 3).outputs()
    shape = ops.constant(np.array([1, S, H, D // H], np.int64))
    perm = ops.constant(np.array([0, 2, 1, 3], np.int64))
    qh, kh, vh = (ops.transpose(ops.reshape(t, shape, False), perm) for t in (q, k, v))
    scores = ops.multiply(ops.matmul(qh, kh, False, True), _c(np.float32(1.0 / (D // H) ** 0.5)))
    a = ops.matmul(ops.softmax(scores, -1), vh, False, False)
    a = ops.reshape(ops.transpose(a, perm), ops.constant(np.array([1, S, D], np.int64)), False)
    x1 = ops.add(x, _linear(ops, a, mod.out))
    h = ops.gelu(_linear(ops, _ln(ops, x1, mod.ln2), mod.fc1), "erf")
    y = ops.add(x1, _linear(ops, h, mod.fc2))
    return core.compile_model(ov.Model([y], [x], "layer"), "CPU", _props(threads))


def _conv_bn(ops, x, conv, bn):
    scale = (bn.weight / torch.sqrt(bn.running_var + bn.eps)).detach().numpy()
    w = conv.weight.detach().numpy() * scale[:, None, None, None]
    b = (bn.bias.detach().numpy() - bn.running_mean.numpy() * scale).reshape(1, C, 1, 1)
    return ops.add(ops.convolution(x, _c(w), [1, 1], [1, 1], [1, 1], [1, 1]), _c(b))


def block_by_hand(core, mod: Block, threads: int):
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([1, C, HW, HW], np.float32, name="x")
    y = _conv_bn(ops, ops.relu(_conv_bn(ops, x, mod.c1, mod.b1)), mod.c2, mod.b2)
    return core.compile_model(ov.Model([ops.relu(ops.add(x, y))], [x], "block"), "CPU", _props(threads))


def _median_seconds(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--compile", type=int, default=5, help="fresh compiles per route")
    args = ap.parse_args()
    import openvino as ov

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    core = ov.Core()
    rows = []
    cases = (("transformer layer", Layer(), (1, S, D), layer_by_hand), ("conv block", Block(), (1, C, HW, HW), block_by_hand))
    for name, mod, shape, by_hand in cases:
        mod = mod.eval()
        x = torch.randn(*shape)
        with torch.no_grad():
            want = mod(x).numpy()
        g, params = rlx.torch.import_module(mod, (x,))
        routes = {"ONNX exporter": lambda g=g, params=params: via_exporter(core, g, params, args.threads),
                  "ov.opset by hand": lambda mod=mod, by_hand=by_hand: by_hand(core, mod, args.threads)}
        compiled, fns = {}, {}
        for route, build in routes.items():
            compiled[route] = build()
            req = compiled[route].create_infer_request()
            feed = {0: x.numpy()}
            got = req.infer(feed)[0]
            err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
            assert err < 1e-4, f"{name} {route}: relative error {err:.2e}"
            fns[route] = (lambda req=req, feed=feed: req.infer(feed))
        build_s = {route: _median_seconds(build, args.compile) for route, build in routes.items()}
        t = measure(fns, args.repeat, number=min(calls_for(f, 0.05) for f in fns.values()), gc_off=False, warmup=True)
        for route in routes:
            rows.append([name, route, build_s[route] * 1e3, t[route].median_cpu * 1e6])
    print(f"ov_graph_api: threads {args.threads}, load {load_average()}, openvino {ov.__version__}")
    print_table(["block", "route", "compile ms", "infer us"], rows)


if __name__ == "__main__":
    main()
