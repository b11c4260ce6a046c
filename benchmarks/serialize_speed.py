"""Serialization speed: rlx canonical JSON vs ONNX protobuf and onnx-ir, same graphs, same run.

    python benchmarks/serialize_speed.py [--sizes 2000,20000,100000] [--repeat 5] [--quick] [--json out.json]

For each size a MIR chain (input, param, then matmul -> add -> gelu repeated) and the
equivalent ONNX graph (MatMul -> Add -> Gelu, opset 20, the weight as a graph input) are
built. Timed in alternation, medians of ``--repeat`` rounds (process CPU time; wall beside it):

* rlx dump: ``rlx.to_json(g)``; rlx load+verify: ``rlx.from_json(text)`` (parse, validate
  every field, rebuild, ``rlx.verify``), with its parts (json.loads, decode, verify);
* onnx dump: ``ModelProto.SerializeToString()``; onnx load: ``ParseFromString``; onnx
  load+check: ParseFromString + ``onnx.checker.check_model`` (ONNX's own validation);
* onnx-ir dump: ``onnx_ir.to_proto(model).SerializeToString()``; onnx-ir load:
  ``ParseFromString`` + ``onnx_ir.from_proto`` (bytes to an editable in-memory graph, the
  closest peer of rlx.from_json).

Ratios are time per node, rlx / peer (< 1: rlx is faster). Target: rlx load+verify >= 100k nodes/s.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "ir"))  # the test suite's chain graph

from common import add_common_args, measure, parse_sizes, print_footer, print_header, print_table, ratio, verdict
from serialize_samples import chain

import rlx
from rlx.ir import serialize


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


def bench(n: int, repeat: int) -> dict:
    g = chain(n, f"chain{n}")
    text = rlx.to_json(g)
    r: dict = {"nodes": len(g), "json_bytes": len(text), "times": {}}

    def decode_only():
        doc = json.loads(text)
        return serialize.Decoder().graph({k: v for k, v in doc.items() if k not in serialize._HEADER}, verify=False)

    body = decode_only()
    fns = {
        "rlx dump (to_json)": lambda: rlx.to_json(g),
        "rlx load+verify (from_json)": lambda: rlx.from_json(text),
        "  json.loads": lambda: json.loads(text),
        "  json.loads + decode + validate": decode_only,
        "  rlx.verify": lambda: rlx.verify(body),
        "rlx fingerprint": lambda: rlx.fingerprint(g),
    }
    try:
        onnx, model = build_onnx(n)
    except ImportError:
        onnx = None
    if onnx is not None:
        blob = model.SerializeToString()
        r["onnx_bytes"] = len(blob)

        def parse():
            m = onnx.ModelProto()
            m.ParseFromString(blob)
            return m

        fns["onnx SerializeToString"] = model.SerializeToString
        fns["onnx ParseFromString"] = parse
        fns["onnx Parse + checker.check_model"] = lambda: onnx.checker.check_model(parse())
        try:
            import onnx_ir as ir

            ir_model = ir.from_proto(model)
            fns["onnx-ir dump (to_proto + Serialize)"] = lambda: ir.to_proto(ir_model).SerializeToString()
            fns["onnx-ir load (Parse + from_proto)"] = lambda: ir.from_proto(parse())
        except ImportError:
            pass
    r["times"] = {k: (t.median_wall, t.median_cpu) for k, t in measure(fns, repeat).items()}
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap, "2000,20000,100000", 5)
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    sizes, repeat = parse_sizes(args.sizes), args.repeat
    if args.quick:
        sizes, repeat = [2000, 20000], 3
    print_header("serialize speed (serialize_speed.py)", f"peers: onnx protobuf, onnx-ir; medians of {repeat} interleaved rounds")
    results = [bench(n, repeat) for n in sizes]
    summary = []
    for r in results:
        n, t = r["nodes"], r["times"]
        sizes_note = f"rlx JSON {r['json_bytes'] / 1e6:.2f} MB" + (f", onnx {r['onnx_bytes'] / 1e6:.2f} MB" if "onnx_bytes" in r else "")
        rows = [[label, wall * 1e3, cpu * 1e3, n / max(cpu, 1e-9)] for label, (wall, cpu) in t.items()]
        print_table(["step", "wall ms (median)", "cpu ms (median)", "nodes/s (cpu)"], rows, title=f"{n:,} nodes: {sizes_note}")

        def cpu(label: str, t: dict = t) -> float:
            return t[label][1] if label in t else float("nan")

        load = cpu("rlx load+verify (from_json)")
        summary.append([n, n / load, n / t["rlx load+verify (from_json)"][0],
                        ratio(cpu("rlx dump (to_json)"), cpu("onnx SerializeToString")),
                        ratio(load, cpu("onnx ParseFromString")), ratio(load, cpu("onnx Parse + checker.check_model")),
                        ratio(cpu("rlx dump (to_json)"), cpu("onnx-ir dump (to_proto + Serialize)")),
                        ratio(load, cpu("onnx-ir load (Parse + from_proto)"))])
    print_table(["nodes", "rlx load+verify nodes/s (cpu)", "(wall)", "dump rlx/onnx", "load rlx/onnx parse",
                 "load rlx/onnx parse+check", "dump rlx/onnx-ir", "load rlx/onnx-ir"], summary,
                title="summary: ratios are rlx time / peer time (CPU medians; < 1 means rlx is faster)")
    worst = min(s[1] for s in summary)
    print(f"\nrlx load+verify: slowest {worst:,.0f} nodes/s (target >= 100,000: {verdict(worst >= 100_000)})")
    print_footer()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
