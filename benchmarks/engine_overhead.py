"""Per-call overhead of the engine backends: ``exe.run(feed)`` against the engine's own Python call on the
same session, on a tiny graph (the engine's kernel time is then small and the difference is rlx's layer:
feed check, binding, output conversion).

Run: .venv/bin/python benchmarks/engine_overhead.py [--repeat 15]

Contenders, interleaved, process CPU time per call (medians): onnxruntime ``sess.run(None, feed)`` vs
``rlx onnxruntime``; OpenVINO ``compiled_model(feed)`` (its documented call) and ``request.infer(feed)``
vs ``rlx openvino`` (and a bare ``request.infer()`` on inputs set once: the engine's floor); torch: the
graph's two ops written in torch under ``inference_mode`` (as a user calls them) and without it (the
floor: rlx's eager module calls the same two torch functions, ``torch.mul`` and ``torch.relu``, with no
Python between them: rlx.backends.torch_backend.direct) vs ``rlx torch``; the numpy
executor's ``run`` beside them (rlx's own engine: no outside call to compare with). Outputs are checked
against ``rlx.run`` before timing.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
from common import calls_for, measure, print_footer, print_header, print_table

import rlx


def tiny() -> tuple[rlx.Graph, dict[str, np.ndarray], dict[str, np.ndarray]]:
    g = rlx.Graph("tiny")
    x = g.input("x", (1, 8))
    g.set_outputs([g.relu(x * g.param("s", (8,)))])
    rng = np.random.default_rng(0)
    return g, {"x": rng.standard_normal((1, 8)).astype(np.float32)}, {"s": rng.standard_normal(8).astype(np.float32)}


def openvino_tensor(a: np.ndarray):
    import openvino

    return openvino.Tensor(a, shared_memory=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    print_header("engine per-call overhead (tiny graph: relu(x * s), x [1, 8], 1 thread)")
    g, feed, params = tiny()
    want = rlx.run(g, feed, params)
    fns: dict[str, object] = {}
    ort = rlx.compile(g, backend="onnxruntime", params=params, threads=1)
    np.testing.assert_allclose(ort.run(feed)[0], want[0], rtol=1e-6)
    sess = ort.session()
    fns["ort session.run"] = lambda: sess.run(None, feed)
    fns["rlx onnxruntime"] = lambda: ort.run(feed)
    try:
        ov = rlx.compile(g, backend="openvino", params=params, threads=1)
    except rlx.RlxError as exc:
        print("openvino:", exc)
    else:
        np.testing.assert_allclose(ov.run(feed)[0], want[0], rtol=1e-6)
        compiled = ov.session().compiled
        req = compiled.create_infer_request()
        fns["ov compiled_model(feed)"] = lambda: compiled(feed)
        fns["ov request.infer(feed)"] = lambda: req.infer(feed)
        bare = compiled.create_infer_request()
        bare.set_input_tensor(0, openvino_tensor(feed["x"]))  # the graph's one input
        fns["ov bare request.infer()"] = bare.infer
        fns["rlx openvino"] = lambda: ov.run(feed)
    try:
        import torch
    except ImportError:
        print("torch: not installed")
    else:
        tt = rlx.compile(g, backend="torch", params=params)
        np.testing.assert_allclose(tt.run(feed)[0], want[0], rtol=1e-6)
        s_t = torch.from_numpy(params["s"])

        def eager() -> np.ndarray:
            with torch.inference_mode():
                return torch.relu(torch.from_numpy(feed["x"]) * s_t).numpy()

        def bare() -> np.ndarray:  # no inference_mode: rlx's module runs without one (no operand requires grad)
            return torch.relu(torch.from_numpy(feed["x"]) * s_t).numpy()

        np.testing.assert_allclose(eager(), want[0], rtol=1e-6)
        np.testing.assert_allclose(bare(), want[0], rtol=1e-6)
        fns["torch eager ops"] = eager
        fns["torch ops, no inference_mode"] = bare
        fns["rlx torch"] = lambda: tt.run(feed)
    host = rlx.compile(g, backend="numpy", params=params)
    np.testing.assert_array_equal(host.run(feed)[0], want[0])
    fns["rlx numpy"] = lambda: host.run(feed)
    number = min(calls_for(f, 0.02, cap=20000) for f in fns.values())  # type: ignore[arg-type]
    timings = measure(fns, repeat=args.repeat, number=number)  # type: ignore[arg-type]
    rows = [[name, f"{t.median_cpu * 1e6:.2f}", f"{t.best_cpu * 1e6:.2f}", f"{t.median_wall * 1e6:.2f}"]
            for name, t in timings.items()]
    print_table(["contender", "cpu median (µs)", "cpu best (µs)", "wall median (µs)"], rows)
    t = timings
    print(f"rlx onnxruntime - session.run: {(t['rlx onnxruntime'].median_cpu - t['ort session.run'].median_cpu) * 1e6:+.2f} µs")
    if "rlx torch" in t:
        for own in ("torch eager ops", "torch ops, no inference_mode"):
            print(f"rlx torch - {own}: {(t['rlx torch'].median_cpu - t[own].median_cpu) * 1e6:+.2f} µs")
    if "rlx openvino" in t:
        for own in ("ov compiled_model(feed)", "ov request.infer(feed)", "ov bare request.infer()"):
            print(f"rlx openvino - {own}: {(t['rlx openvino'].median_cpu - t[own].median_cpu) * 1e6:+.2f} µs")
    print_footer()


if __name__ == "__main__":
    main()
