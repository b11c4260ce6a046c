"""Build + verify speed of static graphs today against the int-only rlx before symbolic dims.

Run: python benchmarks/symbolic_overhead.py [--layers 40] [--repeat 7] [--baseline COMMIT] [--quick]

Symbolic dims (issue 17) made every dim an ``int`` or a ``SymDim``; the target is that static
graphs do not pay for it: build + verify within 10% of before. The baseline is a git worktree of
``--baseline`` (default: the parent of the commit that added ``src/rlx/ir/symbolic.py``, the last
int-only rlx), made in a temporary folder and removed afterwards. Both sides build the same static
transformer stack (benchmarks/build_speed.py's ``build_rlx``) with ``rlx.Graph`` builder calls and
``rlx.verify`` it, each in its own worker process (one per side, so the two rlx packages never
meet); the workers take turns, one sample each, the order rotating every round, so load drift on
a shared machine hits both alike. Medians of CPU time per node; wall medians shown beside.
The same run also times today's rlx on the stack with symbolic batch and sequence dims (for
information: that path did not exist before).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO_DIR, print_footer, print_header, print_table, ratio, verdict

TARGET = 1.10  # today / before, CPU time per node
WORKER = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[1])
import rlx
import build_speed as bs

STATIC = bs.B, bs.S

def build(layers, symbolic):
    bs.B, bs.S = ("batch", "seq") if symbolic else STATIC
    return bs.build_rlx(layers)

for line in sys.stdin:
    layers, symbolic = json.loads(line)
    gc.collect(); gc.disable()
    w, c = time.perf_counter(), time.process_time()
    g = build(layers, symbolic)
    rlx.verify(g)
    c, w = time.process_time() - c, time.perf_counter() - w
    gc.enable()
    print(json.dumps([len(g.nodes), w, c, rlx.__file__]), flush=True)
"""


def _sh(*args: str, cwd: str = REPO_DIR) -> str:
    return subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def default_baseline() -> str:
    added = _sh("git", "log", "--diff-filter=A", "--format=%H", "--", "src/rlx/ir/symbolic.py").splitlines()[-1]
    return _sh("git", "rev-parse", f"{added}~1")


class Worker:
    """A python process with one rlx on its path, timing one build + verify per request."""

    def __init__(self, src: str):
        env = {**os.environ, "PYTHONPATH": src}
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER, str(Path(__file__).resolve().parent)], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def sample(self, layers: int, symbolic: bool = False) -> tuple[int, float, float, str]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps([layers, symbolic]) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("benchmark worker died (see its stderr above)")
        return tuple(json.loads(line))  # type: ignore[return-value]

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=40, help="transformer layers (about 30 nodes each; default 40)")
    ap.add_argument("--repeat", type=int, default=7, help="interleaved rounds; medians are reported (default 7)")
    ap.add_argument("--baseline", help="commit to compare with (default: the last one before symbolic dims)")
    ap.add_argument("--quick", action="store_true", help="few layers and rounds: a smoke run")
    args = ap.parse_args()
    layers, repeat = (4, 3) if args.quick else (args.layers, args.repeat)
    base = args.baseline or default_baseline()
    tmp = tempfile.mkdtemp(prefix="rlx-baseline-")
    tree = os.path.join(tmp, "tree")
    _sh("git", "worktree", "add", "--detach", "--quiet", tree, base)
    try:
        subject = _sh("git", "log", "-1", "--format=%s", base)[:60]
        print_header("Static build + verify: today vs the int-only rlx", f"baseline {base[:10]} ({subject})")
        today = os.path.join(REPO_DIR, "src")
        sides = {"today": (Worker(today), False), "before": (Worker(os.path.join(tree, "src")), False),
                 "today symbolic": (Worker(today), True)}
        samples: dict[str, list[tuple]] = {name: [] for name in sides}
        for worker, symbolic in sides.values():  # warm up: imports, builder methods, caches
            worker.sample(layers, symbolic)
        names = list(sides)
        for r in range(repeat):
            for name in names[r % 3:] + names[:r % 3]:
                worker, symbolic = sides[name]
                samples[name].append(worker.sample(layers, symbolic))
        for worker, _ in sides.values():
            worker.close()
        where = {name: s[0][3] for name, s in samples.items()}
        assert where["today"] != where["before"], where
        rows, med, best = [], {}, {}
        for name, s in samples.items():
            nodes = s[0][0]
            cpu, wall = statistics.median(x[2] for x in s), statistics.median(x[1] for x in s)
            med[name], best[name] = cpu, min(x[2] for x in s)
            rows.append([name, nodes, cpu * 1e3, best[name] * 1e3, wall * 1e3, nodes / cpu, cpu / nodes * 1e6])
        print_table(["rlx", "nodes", "cpu ms (median)", "cpu ms (min)", "wall ms (median)", "nodes/s (cpu)", "µs/node (cpu)"],
                    rows, title=f"{layers}-layer transformer stack, build + verify, {repeat} rounds")
        r = ratio(med["today"], med["before"])
        print(f"\ntoday / before (cpu, medians): {r:.3f} (target <= {TARGET}: {verdict(r <= TARGET)}); "
              f"minimums: {ratio(best['today'], best['before']):.3f} (less sensitive to a loaded machine)")
        print(f"symbolic / static today (cpu, medians): {ratio(med['today symbolic'], med['today']):.3f}")
        print_footer()
    finally:
        _sh("git", "worktree", "remove", "--force", tree)
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
