"""Serialization speed: rlx canonical JSON vs ONNX protobuf, same graphs, same run.

    python benchmarks/serialize_speed.py [--sizes 10000 100000] [--repeat 3]

For each size a MIR chain (input, param, then matmul -> add -> gelu repeated) and the
equivalent ONNX graph (MatMul -> Add -> Gelu, opset 20, the weight as a graph input) are
built. Timed, best of ``--repeat``:

* rlx dump: ``rlx.to_json(g)``; rlx load+verify: ``rlx.from_json(text)`` (parse, validate
  every field, rebuild, ``rlx.verify``), with its parts (json.loads, decode, verify);
* onnx dump: ``ModelProto.SerializeToString()``; onnx load: ``ParseFromString``; onnx
  load+check: ParseFromString + ``onnx.checker.check_model`` (ONNX's own validation).

Target: rlx load+verify >= 100k nodes/s. Not run by CI.
"""

from __future__ import annotations

import argparse
import gc
import json
import time

import rlx
from rlx.ir import serialize


def build_rlx(n: int) -> rlx.Graph:
    g = rlx.Graph(f"chain{n}")
    x = g.input("x", (8, 64))
    w = g.param("w", (64, 64))
    cur = x
    while len(g) + 3 <= n:
        cur = g.gelu(g.matmul(cur, w) + cur)
    g.set_outputs([cur])
    return g


def build_onnx(n: int):
    import onnx
    from onnx import TensorProto, helper

    nodes = []
    cur = "x"
    k = 2
    i = 0
    while k + 3 <= n:
        nodes.append(helper.make_node("MatMul", [cur, "w"], [f"m{i}"], name=f"matmul{i}"))
        nodes.append(helper.make_node("Add", [f"m{i}", cur], [f"a{i}"], name=f"add{i}"))
        nodes.append(helper.make_node("Gelu", [f"a{i}"], [f"g{i}"], name=f"gelu{i}"))
        cur = f"g{i}"
        i += 1
        k += 3
    graph = helper.make_graph(
        nodes, f"chain{n}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64]), helper.make_tensor_value_info("w", TensorProto.FLOAT, [64, 64])],
        [helper.make_tensor_value_info(cur, TensorProto.FLOAT, [8, 64])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    return onnx, model


def best(fn, repeat: int) -> tuple[float, float]:
    """Best (wall, process CPU) seconds of ``repeat`` runs, the cyclic GC paused as the rlx
    loader itself does. CPU time is the robust figure on a busy machine."""
    walls, cpus = [], []
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        finally:
            gc.enable()
    return min(walls), min(cpus)


def bench(n: int, repeat: int) -> dict:
    g = build_rlx(n)
    text = rlx.to_json(g)
    r: dict = {"nodes": len(g), "json_bytes": len(text), "times": {}}
    t = r["times"]

    def decode_only():
        doc = json.loads(text)
        return serialize.Decoder().graph({k: v for k, v in doc.items() if k not in serialize._HEADER}, verify=False)

    t["rlx dump (to_json)"] = best(lambda: rlx.to_json(g), repeat)
    t["rlx load+verify (from_json)"] = best(lambda: rlx.from_json(text), repeat)
    t["  json.loads"] = best(lambda: json.loads(text), repeat)
    t["  json.loads + decode + validate"] = best(decode_only, repeat)
    body = decode_only()
    t["  rlx.verify"] = best(lambda: rlx.verify(body), repeat)
    t["rlx fingerprint"] = best(lambda: rlx.fingerprint(g), repeat)
    try:
        onnx, model = build_onnx(n)
    except ImportError:
        return r
    blob = model.SerializeToString()
    r["onnx_bytes"] = len(blob)

    def parse():
        m = onnx.ModelProto()
        m.ParseFromString(blob)
        return m

    t["onnx SerializeToString"] = best(model.SerializeToString, repeat)
    t["onnx ParseFromString"] = best(parse, repeat)
    t["onnx Parse + checker.check_model"] = best(lambda: onnx.checker.check_model(parse()), repeat)
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    results = [bench(n, args.repeat) for n in args.sizes]
    for r in results:
        n, t = r["nodes"], r["times"]
        sizes = f"rlx JSON {r['json_bytes'] / 1e6:.1f} MB" + (f", onnx {r['onnx_bytes'] / 1e6:.1f} MB" if "onnx_bytes" in r else "")
        print(f"\n== {n} nodes: {sizes}")
        print(f"  {'':36s} {'wall ms':>9s} {'cpu ms':>9s} {'k nodes/s (cpu)':>16s}")
        for label, (wall, cpu) in t.items():
            print(f"  {label:36s} {wall * 1e3:9.1f} {cpu * 1e3:9.1f} {n / max(cpu, 1e-9) / 1e3:16.1f}")
        wall, cpu = t["rlx load+verify (from_json)"]
        print(f"  load+verify: {n / cpu / 1e3:.1f} k nodes/s cpu, {n / wall / 1e3:.1f} k nodes/s wall (target >= 100 k)")
        if "onnx_bytes" in r:
            def ratio(a: str, b: str, t: dict = t) -> str:
                return f"{t[a][1] / t[b][1]:.1f}x"

            print(f"  rlx/onnx (cpu): dump {ratio('rlx dump (to_json)', 'onnx SerializeToString')}, "
                  f"load {ratio('rlx load+verify (from_json)', 'onnx ParseFromString')} vs parse, "
                  f"{ratio('rlx load+verify (from_json)', 'onnx Parse + checker.check_model')} vs parse+check")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
