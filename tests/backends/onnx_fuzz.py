"""ONNX mutation fuzzer for ``rlx.onnx.import_model``, run in child processes with time and memory limits.

Seeds are the models onnx ships under ``onnx/backend/test/data`` (simple, pytorch-converted,
pytorch-operator, light). Case ``i`` is fully determined by ``i``: a seed chosen and mutated
by ``random.Random(i)`` (attribute values, inputs / outputs dropped or added, op types
changed, random nodes inserted, tensors and their external-data locations corrupted,
declared types, opsets, raw bytes). Each case is imported from bytes with a ``base_dir``
holding hostile entries (a symlink out, a FIFO, a directory); the only acceptable outcomes
are a graph or an :class:`rlx.RlxError`.

Workers are child processes (``RLIMIT_AS`` bounded) that announce each case before running
it, so a crash or a hang is charged to its case and the worker restarts after it.

Reproduce one case: ``python tests/backends/onnx_fuzz.py --case N`` (prints the mutations and the outcome).
"""

from __future__ import annotations

import glob
import json
import os
import random
import selectors
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

MEMORY_LIMIT = 3 << 30  # bytes of address space per worker
CASE_CPU_LIMIT_S = 5.0  # CPU seconds one case may take (a hostile file must not cost more)
CASE_WALL_LIMIT_S = 60.0  # no answer in this long: the case hangs (wall clock, generous for a loaded machine)
INTS = [0, 1, 2, 3, -1, -2, 7, 2**31, -(2**31), 2**62, 2**63 - 1, -(2**63), 10**9, 10**12, 10**18]
FLOATS = [0.0, -1.0, 1e30, -1e30, float("nan"), float("inf"), float("-inf"), 1e-30, 0.5]
STRINGS = ["", "x", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "linear", "cubic", "nearest", "constant",
           "reflect", "edge", "wrap", "tanh", "Relu", "half_pixel", "asymmetric", "align_corners", "\x00\xff"]
LOCATIONS = ["w.bin", "../w.bin", "/etc/passwd", "link", "fifo", "sub", "", "missing.bin", "a\x00b", "./w.bin",
             "sub/../../w.bin", "C:\\w.bin", "w.bin" + "/x" * 50]


def seed_paths() -> list[str]:
    import onnx

    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    paths = glob.glob(os.path.join(root, "*", "*", "model.onnx")) + glob.glob(os.path.join(root, "light", "*.onnx"))
    return sorted(p for p in paths if os.path.getsize(p) < 8 << 20)


def make_base_dir(path: str) -> str:
    """A folder with one good data file and hostile entries (symlink out, FIFO, directory)."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "w.bin"), "wb") as fh:
        fh.write(bytes(range(256)) * 64)
    os.makedirs(os.path.join(path, "sub"), exist_ok=True)
    for name, make in (("link", lambda p: os.symlink("/etc/hostname", p)), ("fifo", os.mkfifo)):
        target = os.path.join(path, name)
        if not os.path.lexists(target):
            try:
                make(target)
            except OSError:
                pass
    return path


# ---------------------------------------------------------------------------------- mutation
_OP_TYPES: list[str] | None = None


class Mutator:
    def __init__(self, onnx, model, rnd: random.Random):
        self.onnx, self.m, self.rnd = onnx, model, rnd
        self.what: list[str] = []

    def graphs(self, g=None, depth=0):
        g = g or self.m.graph
        yield g
        if depth > 6:
            return
        for n in g.node:
            for a in n.attribute:
                if a.HasField("g"):
                    yield from self.graphs(a.g, depth + 1)
                for sub in a.graphs:
                    yield from self.graphs(sub, depth + 1)

    def names(self, g) -> list[str]:
        out = [vi.name for vi in g.input] + [t.name for t in g.initializer]
        out += [o for n in g.node for o in n.output if o]
        return out or ["x"]

    def pick_node(self):
        nodes = [(g, n) for g in self.graphs() for n in g.node]
        return self.rnd.choice(nodes) if nodes else (self.m.graph, None)

    def op_types(self) -> list[str]:
        global _OP_TYPES
        if _OP_TYPES is None:
            _OP_TYPES = sorted({s.name for s in self.onnx.defs.get_all_schemas() if s.domain == ""})
        return _OP_TYPES

    def random_attr(self, name: str, kind: int):
        r, h = self.rnd, self.onnx.helper
        A = self.onnx.AttributeProto
        if kind == A.INT:
            return h.make_attribute(name, r.choice(INTS))
        if kind == A.INTS:
            return h.make_attribute(name, [r.choice(INTS[:8] if r.random() < 0.7 else INTS) for _ in range(r.randint(0, 6))],
                                    attr_type=A.INTS)
        if kind == A.FLOAT:
            return h.make_attribute(name, r.choice(FLOATS))
        if kind == A.FLOATS:
            return h.make_attribute(name, [r.choice(FLOATS) for _ in range(r.randint(0, 4))], attr_type=A.FLOATS)
        if kind == A.STRING:
            return h.make_attribute(name, r.choice(STRINGS))
        if kind == A.STRINGS:
            return h.make_attribute(name, [r.choice(STRINGS) for _ in range(r.randint(0, 3))], attr_type=A.STRINGS)
        if kind == A.TENSOR:
            return h.make_attribute(name, self.random_tensor(name))
        if kind == A.GRAPH:
            return h.make_attribute(name, self.random_graph())
        return h.make_attribute(name, r.choice(INTS))

    def random_tensor(self, name: str):
        r = self.rnd
        dims = [r.choice([0, 1, 2, 3]) for _ in range(r.randint(0, 3))]
        dtype = r.choice([1, 1, 7, 7, 6, 9, 10, 11, 2, 3, 16, 4, 13])
        n = 1
        for d in dims:
            n *= d
        import numpy as np

        arr = (np.arange(n) % 5 - 1).reshape(dims)
        t = self.onnx.helper.make_tensor(name, dtype, dims, arr.astype(np.float64).reshape(-1).tolist()
                                         if dtype in (1, 10, 11, 16) else arr.astype(np.int64).reshape(-1).tolist())
        return t

    def random_graph(self):
        h, T = self.onnx.helper, self.onnx.TensorProto
        nodes = [h.make_node(self.rnd.choice(["Identity", "Add", "Neg", "Relu"]), ["a", "a"][: 1 + (self.rnd.random() < .5)], ["b"])]
        return h.make_graph(nodes, "sub", [h.make_tensor_value_info("a", T.FLOAT, [2])], [h.make_tensor_value_info("b", T.FLOAT, [2])])

    # --- the mutations
    def m_attr_value(self):
        _g, n = self.pick_node()
        if n is None or not n.attribute:
            return self.m_node_insert()
        a = self.rnd.choice(n.attribute)
        if a.type == self.onnx.AttributeProto.TENSOR:
            self.corrupt_tensor(a.t)
        elif a.type == self.onnx.AttributeProto.GRAPH and self.rnd.random() < 0.5:
            a.g.CopyFrom(self.random_graph())
        else:
            a.CopyFrom(self.random_attr(a.name, a.type))
        self.what.append(f"attr {n.op_type}.{a.name}")

    def m_attr_add(self):
        _g, n = self.pick_node()
        if n is None:
            return self.m_node_insert()
        try:
            schema = self.onnx.defs.get_schema(n.op_type, 30, n.domain)
            specs = list(schema.attributes.values())
        except Exception:
            specs = []
        if specs and self.rnd.random() < 0.8:
            spec = self.rnd.choice(specs)
            name, kind = spec.name, int(spec.type)
        else:
            name, kind = self.rnd.choice(["axis", "axes", "perm", "x", "mode"]), self.rnd.choice([1, 2, 3, 6, 7, 8])
        for i, a in enumerate(n.attribute):
            if a.name == name:
                del n.attribute[i]
                break
        n.attribute.append(self.random_attr(name, kind))
        self.what.append(f"attr+ {n.op_type}.{name}")

    def m_attr_type(self):
        _g, n = self.pick_node()
        if n is None or not n.attribute:
            return self.m_node_insert()
        a = self.rnd.choice(n.attribute)
        a.type = self.rnd.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14])
        self.what.append(f"attrtype {n.op_type}.{a.name}={a.type}")

    def m_inputs(self):
        g, n = self.pick_node()
        if n is None:
            return self.m_node_insert()
        r = self.rnd
        kind = r.choice(["drop", "empty", "extra", "undefined", "truncate", "dup"])
        if kind == "drop" and n.input:
            del n.input[r.randrange(len(n.input))]
        elif kind == "empty" and n.input:
            n.input[r.randrange(len(n.input))] = ""
        elif kind == "extra":
            n.input.append(r.choice(self.names(g)))
        elif kind == "undefined" and n.input:
            n.input[r.randrange(len(n.input))] = "no_such_value"
        elif kind == "truncate":
            del n.input[r.randint(0, len(n.input)):]
        elif kind == "dup" and n.input:
            n.input.append(n.input[0])
        self.what.append(f"inputs-{kind} {n.op_type}")

    def m_outputs(self):
        g, n = self.pick_node()
        if n is None:
            return self.m_node_insert()
        r = self.rnd
        kind = r.choice(["extra", "drop", "empty", "same", "input_name"])
        if kind == "extra":
            n.output.append(f"extra{r.randrange(9)}")
        elif kind == "drop" and n.output:
            del n.output[-1]
        elif kind == "empty" and n.output:
            n.output[r.randrange(len(n.output))] = ""
        elif kind == "same" and n.output:
            n.output.append(n.output[0])
        elif kind == "input_name" and n.output:
            n.output[0] = r.choice(self.names(g))
        self.what.append(f"outputs-{kind} {n.op_type}")

    def m_op_type(self):
        _g, n = self.pick_node()
        if n is None:
            return self.m_node_insert()
        if self.rnd.random() < 0.9:
            n.op_type = self.rnd.choice(self.op_types())
        else:
            n.domain = self.rnd.choice(["ai.onnx.ml", "com.microsoft", "x", "ai.onnx.preview.training"])
        self.what.append(f"op {n.op_type}")

    def m_node_insert(self):
        g = self.rnd.choice(list(self.graphs()))
        op = self.rnd.choice(self.op_types())
        try:
            schema = self.onnx.defs.get_schema(op, 30, "")
            n_in = max(len(schema.inputs), schema.min_input)
            n_out = max(len(schema.outputs), 1)
            specs = list(schema.attributes.values())
        except Exception:
            n_in, n_out, specs = 2, 1, []
        names = self.names(g)
        node = self.onnx.helper.make_node(op, [self.rnd.choice(names) if self.rnd.random() < 0.9 else ""
                                               for _ in range(self.rnd.randint(max(n_in - 1, 0), n_in + 1))],
                                          [f"new{self.rnd.randrange(10**6)}_{j}" for j in range(n_out)])
        for spec in self.rnd.sample(specs, min(len(specs), self.rnd.randint(0, 3))):
            node.attribute.append(self.random_attr(spec.name, int(spec.type)))
        pos = self.rnd.randint(0, len(g.node))
        g.node.insert(pos, node)
        if self.rnd.random() < 0.7 and g.output:
            g.output[0].name = node.output[0]
        self.what.append(f"insert {op}")

    def m_nodes(self):
        g = self.rnd.choice(list(self.graphs()))
        if not g.node:
            return self.m_node_insert()
        r = self.rnd
        kind = r.choice(["delete", "duplicate", "swap", "reverse"])
        i = r.randrange(len(g.node))
        if kind == "delete":
            del g.node[i]
        elif kind == "duplicate":
            g.node.insert(i, g.node[i])
        elif kind == "swap" and len(g.node) > 1:
            j = r.randrange(len(g.node))
            a, b = type(g.node[i])(), type(g.node[i])()
            a.CopyFrom(g.node[i])
            b.CopyFrom(g.node[j])
            g.node[i].CopyFrom(b)
            g.node[j].CopyFrom(a)
        elif kind == "reverse":
            nodes = list(g.node)[::-1]
            copies = [type(n)() for n in nodes]
            for c, n in zip(copies, nodes):
                c.CopyFrom(n)
            del g.node[:]
            g.node.extend(copies)
        self.what.append(f"nodes-{kind}")

    def corrupt_tensor(self, t):
        r = self.rnd
        kind = r.choice(["dims", "raw", "dtype", "external", "typed", "huge"])
        if kind == "dims":
            if t.dims and r.random() < 0.5:
                t.dims[r.randrange(len(t.dims))] = r.choice([0, -1, 3, 2**40, 2**62])
            else:
                t.dims.append(r.choice([0, 2, 7]))
        elif kind == "raw":
            data = t.raw_data
            t.raw_data = data[: r.randint(0, len(data))] if data and r.random() < 0.6 else data + b"\x01" * r.randint(1, 9)
        elif kind == "dtype":
            t.data_type = r.choice(range(0, 28))
        elif kind == "external":
            del t.external_data[:]
            t.data_location = 1
            for key, value in (("location", r.choice(LOCATIONS)), ("offset", r.choice(["0", "3", "-1", "x", "99999999"])),
                               ("length", r.choice(["", "4", "16", "999999999999"]))):
                if value or r.random() < 0.5:
                    e = t.external_data.add()
                    e.key, e.value = key, value
            t.ClearField("raw_data")
        elif kind == "typed":
            t.ClearField("raw_data")
            t.float_data.extend([1.0] * r.randint(0, 5))
            t.int64_data.extend([2**62] * r.randint(0, 5))
        else:
            del t.dims[:]
            t.dims.extend([2**31, 2**31])
        self.what.append(f"tensor-{kind} {t.name}")

    def m_tensor(self):
        inits = [t for g in self.graphs() for t in g.initializer]
        consts = [a.t for g in self.graphs() for n in g.node for a in n.attribute if a.type == self.onnx.AttributeProto.TENSOR]
        pool = inits + consts
        if not pool:
            return self.m_attr_value()
        self.corrupt_tensor(self.rnd.choice(pool))

    def m_value_info(self):
        r = self.rnd
        g = self.m.graph
        vis = list(g.input) + list(g.output) + list(g.value_info)
        if not vis:
            return self.m_node_insert()
        vi = r.choice(vis)
        kind = r.choice(["elem", "dim", "rank", "noshape", "sequence", "param"])
        tt = vi.type.tensor_type
        if kind == "elem":
            tt.elem_type = r.choice(range(0, 28))
        elif kind == "dim" and tt.shape.dim:
            tt.shape.dim[r.randrange(len(tt.shape.dim))].dim_value = r.choice([0, 1, 2**40, 2**62, 10**12])
        elif kind == "rank":
            tt.shape.dim.add().dim_value = r.choice([1, 3, 0])
        elif kind == "noshape":
            tt.ClearField("shape")
        elif kind == "sequence":
            vi.type.sequence_type.elem_type.tensor_type.elem_type = 1
        elif kind == "param" and tt.shape.dim:
            tt.shape.dim[r.randrange(len(tt.shape.dim))].dim_param = r.choice(["N", "", "0bad", "a b"])
        self.what.append(f"valueinfo-{kind} {vi.name}")

    def m_opset(self):
        r = self.rnd
        if self.m.opset_import and r.random() < 0.8:
            self.m.opset_import[0].version = r.choice([1, 6, 7, 9, 11, 13, 17, 18, 21, 23, 25, 99, 2**40, -1])
        else:
            o = self.m.opset_import.add()
            o.domain, o.version = r.choice(["", "ai.onnx.ml", "x"]), r.choice([1, 3, 99])
        self.what.append("opset")

    def m_graph_io(self):
        g = self.m.graph
        r = self.rnd
        kind = r.choice(["drop_out", "out_is_input", "drop_in", "dup_in", "out_undefined"])
        if kind == "drop_out" and g.output:
            del g.output[r.randrange(len(g.output))]
        elif kind == "out_is_input" and g.output and g.input:
            g.output[0].name = r.choice(g.input).name
        elif kind == "drop_in" and g.input:
            del g.input[r.randrange(len(g.input))]
        elif kind == "dup_in" and g.input:
            g.input.append(g.input[0])
        elif kind == "out_undefined" and g.output:
            g.output[0].name = "never_defined"
        self.what.append(f"graphio-{kind}")

    MUTATIONS = ["m_attr_value"] * 5 + ["m_attr_add"] * 3 + ["m_attr_type", "m_inputs", "m_inputs", "m_outputs", "m_op_type",
                 "m_op_type"] + ["m_node_insert"] * 4 + ["m_nodes", "m_tensor", "m_tensor", "m_value_info", "m_value_info",
                 "m_opset", "m_graph_io"]


def make_case(onnx, seeds: list[bytes], i: int) -> tuple[bytes, str]:
    """Case ``i``: (model bytes, description)."""
    rnd = random.Random(i)
    k = rnd.randrange(len(seeds))
    model = onnx.ModelProto()
    model.ParseFromString(seeds[k])
    mut = Mutator(onnx, model, rnd)
    for _ in range(rnd.choice((1, 1, 2, 2, 3, 4))):
        name = rnd.choice(Mutator.MUTATIONS)
        try:
            getattr(mut, name)()
        except (ValueError, TypeError, IndexError, OverflowError):  # a mutation protobuf refuses to represent: skip it
            mut.what.append(f"{name} skipped")
    data = model.SerializeToString()
    if rnd.random() < 0.05:
        data = bytearray(data)
        for _ in range(rnd.randint(1, 4)):
            if data:
                data[rnd.randrange(len(data))] = rnd.randrange(256)
        if rnd.random() < 0.5:
            data = data[: rnd.randrange(len(data) + 1)]
        mut.what.append("bytes")
        data = bytes(data)
    return data, f"seed {k} " + "; ".join(mut.what)


# ---------------------------------------------------------------------------------- worker
def worker(start: int, stop: int, base_dir: str) -> None:
    """Child process: run cases [start, stop), writing 'S i' before and 'R i outcome detail' after each."""
    import resource
    import warnings

    warnings.simplefilter("ignore")
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    sys.setrecursionlimit(4000)
    import onnx

    import rlx
    from rlx.frontends.onnx import import_model

    seeds = [open(p, "rb").read() for p in seed_paths()]
    out = sys.stdout
    for i in range(start, stop):
        data, what = make_case(onnx, seeds, i)
        out.write(f"S {i}\n")
        out.flush()
        t0 = time.process_time()
        try:
            import_model(data, base_dir=base_dir)
            outcome, detail = "imported", ""
        except rlx.RlxError as exc:
            outcome, detail = "rlx_error", type(exc).__name__
        except BaseException as exc:
            outcome, detail = "other_error", f"{type(exc).__name__}: {str(exc)[:300]}"
        dt = time.process_time() - t0
        if dt > CASE_CPU_LIMIT_S:
            outcome, detail = "slow", f"{dt:.1f} s CPU"
        if outcome in ("other_error", "slow"):
            detail += f" | {what}"
        out.write(f"R {i} {outcome} {json.dumps(detail)}\n")
        out.flush()


# ---------------------------------------------------------------------------------- driver
@dataclass
class Report:
    outcomes: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.outcomes.values())

    def bad(self) -> int:
        return sum(self.outcomes[k] for k in ("other_error", "slow", "crash", "hang"))


def _spawn(start: int, stop: int, base_dir: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="0")
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(start), str(stop), base_dir],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1)


def run(n_cases: int, base_dir: str, start: int = 0, jobs: int = 2) -> Report:
    """Run cases [start, start + n_cases) over ``jobs`` workers; crashes and hangs are charged to their case."""
    report = Report()
    stop_all = start + n_cases
    bounds = [start + n_cases * j // jobs for j in range(jobs + 1)]
    pending = [(bounds[j], bounds[j + 1]) for j in range(jobs) if bounds[j] < bounds[j + 1]]
    sel = selectors.DefaultSelector()
    state: dict[subprocess.Popen, dict] = {}

    def launch(lo: int, hi: int) -> None:
        if lo >= hi:
            return
        p = _spawn(lo, hi, base_dir)
        state[p] = {"lo": lo, "hi": hi, "current": None, "since": time.monotonic()}
        os.set_blocking(p.stdout.fileno(), False)
        sel.register(p.stdout, selectors.EVENT_READ, p)

    def finish(p: subprocess.Popen, outcome: str) -> None:
        st = state.pop(p)
        sel.unregister(p.stdout)
        if p.poll() is None:
            p.kill()
        p.wait()
        cur = st["current"]
        if cur is None:  # died between cases (or at start): charge the next one
            cur = st["lo"]
        report.outcomes[outcome] += 1
        report.failures.append(f"case {cur}: {outcome} (exit {p.returncode})")
        launch(cur + 1, st["hi"])

    buffers: dict[subprocess.Popen, str] = {}
    for lo, hi in pending:
        launch(lo, hi)
    while state:
        for key, _ in sel.select(timeout=1.0):
            p = key.data
            chunk = p.stdout.read()
            if chunk is None:
                continue
            if chunk == "":  # the worker exited
                p.wait()
                st = state[p]
                if st["current"] is None and st["lo"] >= st["hi"] and p.returncode == 0:
                    state.pop(p)
                    sel.unregister(p.stdout)
                else:
                    finish(p, "crash")
                continue
            *lines, buffers[p] = (buffers.get(p, "") + chunk).split("\n")
            st = state[p]
            for line in lines:
                tag, _, rest = line.partition(" ")
                if tag == "S":
                    st["current"], st["since"] = int(rest), time.monotonic()
                elif tag == "R":
                    idx, outcome, detail = rest.split(" ", 2)
                    report.outcomes[outcome] += 1
                    if outcome in ("other_error", "slow"):
                        report.failures.append(f"case {idx}: {outcome}: {json.loads(detail)}")
                    st["current"], st["lo"] = None, int(idx) + 1
        now = time.monotonic()
        for p, st in list(state.items()):
            if st["current"] is not None and now - st["since"] > CASE_WALL_LIMIT_S:
                finish(p, "hang")
    assert report.total <= stop_all - start
    return report


def main(argv: list[str]) -> int:
    if argv[:1] == ["--worker"]:
        worker(int(argv[1]), int(argv[2]), argv[3])
        return 0
    import tempfile

    base = make_base_dir(tempfile.mkdtemp(prefix="rlx_onnx_fuzz_"))
    if argv[:1] == ["--case"]:
        import onnx

        i = int(argv[1])
        seeds = [open(p, "rb").read() for p in seed_paths()]
        data, what = make_case(onnx, seeds, i)
        print(what)
        from rlx.frontends.onnx import import_model

        import_model(data, base_dir=base)
        print("imported")
        return 0
    n = int(argv[0]) if argv else 1000
    start = int(argv[1]) if len(argv) > 1 else 0
    t0 = time.time()
    rep = run(n, base, start=start, jobs=int(os.environ.get("RLX_FUZZ_JOBS", "1")))
    print(f"{rep.total} cases from {start} in {time.time() - t0:.0f} s: {dict(rep.outcomes)}")
    for f in rep.failures[:60]:
        print(" ", f)
    return 1 if rep.bad() else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
