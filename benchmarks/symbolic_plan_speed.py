"""What running one symbolic graph at many sizes costs the numpy arena executor.

Run: python benchmarks/symbolic_plan_speed.py [--layers 4] [--repeat 5] [--quick]

The graph (benchmarks/build_speed.py's transformer stack, batch and seq symbolic) is optimized
and planned once: that plan keeps ``dynamic_symbols`` and no offsets. Each run binds the symbols
from the feed; the first run at a binding specialises the LIR to those sizes (``rlx.lir.specialize``:
sizes substituted, buffers placed again) and builds an executor for it, kept in an LRU
``PlanCache`` (16 bindings); later runs at that binding reuse it. Columns, per binding (medians):

* first run: specialise + plan + executor + run (what a new size costs);
* cached run: a run at a size seen before;
* static: the same graph built with those sizes as ints, optimize + plan + compile + run (what
  building per size by hand would cost), and its run alone.

Ratios: first run / static build (< 1: binding beats rebuilding), cached / static run (the
price of the binding check on every run).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import build_speed as bs
import numpy as np
from common import print_footer, print_header, print_table, ratio

import rlx

SIZES = [(1, 7), (2, 16), (3, 33), (8, 64)]


def stack(layers: int, batch, seq) -> rlx.Graph:
    bs.B, bs.S = batch, seq
    return bs.build_rlx(layers)


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5, help="rounds; medians are reported (default 5)")
    ap.add_argument("--quick", action="store_true", help="one layer, two rounds, two sizes: a smoke run")
    args = ap.parse_args()
    layers, repeat, sizes = (1, 2, SIZES[:2]) if args.quick else (args.layers, args.repeat, SIZES)
    print_header("One symbolic graph at many sizes (numpy arena executor)")
    g = stack(layers, "batch", "seq")
    rng = np.random.default_rng(0)
    weights = {n: (rng.standard_normal(tuple(v.shape)) * 0.1).astype(np.float32) for n, v in g.params().items()}
    once = []
    for _ in range(repeat):
        start = time.perf_counter()
        lir = rlx.plan(rlx.optimize(g)[0])
        once.append(time.perf_counter() - start)
    print(f"\n{len(g.nodes)} nodes; optimize + plan of the symbolic graph, once: {statistics.median(once) * 1e3:.1f} ms "
          f"(dynamic symbols: {', '.join(lir.plan.dynamic_symbols)})")
    rows = []
    for b, s in sizes:
        feed = {"x": rng.standard_normal((b, s, bs.E)).astype(np.float32)}
        first, cached, static_build, static_run = [], [], [], []
        for _ in range(repeat):
            exe = rlx.compile(lir, backend="numpy", params=weights)  # a fresh executor: empty plan cache
            first.append(_timed(lambda: exe.run(feed)))  # noqa: B023
            cached.append(statistics.median(_timed(lambda: exe.run(feed)) for _ in range(3)))  # noqa: B023
            box = {}
            static_build.append(_timed(lambda: box.setdefault("exe", rlx.compile(  # noqa: B023
                rlx.plan(rlx.optimize(stack(layers, b, s))[0]), backend="numpy", params=weights)).run(feed)))  # noqa: B023
            static_run.append(statistics.median(_timed(lambda: box["exe"].run(feed)) for _ in range(3)))  # noqa: B023
        np.testing.assert_allclose(exe.run(feed)[0], box["exe"].run(feed)[0], rtol=1e-5, atol=1e-5)
        m = [statistics.median(x) * 1e3 for x in (first, cached, static_build, static_run)]
        rows.append([f"({b}, {s})", *m, ratio(m[0], m[2]), ratio(m[1], m[3])])
    print_table(["binding", "first run ms", "cached run ms", "static build+run ms", "static run ms",
                 "first / static build", "cached / static run"], rows,
                title=f"{layers}-layer stack, wall-time medians of {repeat} rounds")
    print_footer()


if __name__ == "__main__":
    main()
