"""What an isolated child runs for the kill tests (see isolate.py): each of rlx's file writers
rewrites one file in a loop, alternating two versions, in a forked process that is SIGKILLed at
random moments; after each kill the file must be the old complete version or the new complete one.

The checks are independent of the writer: byte equality with the version written once beforehand
(or, for a model and a binding, loading it and comparing with what each version holds).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import random
import signal
import time
from collections.abc import Callable

import numpy as np

import rlx


def _graph(v: int) -> rlx.Graph:
    g = rlx.Graph(f"kill{v}")
    x = g.input("x", (4, 64))
    c = g.constant(np.full((64, 64), 1.0 + v, np.float32), name="big")  # > inline size: a sidecar
    g.set_outputs([g.gelu(g.matmul(x, c) + g.param("b", (64,)))])
    return g


def _params(v: int) -> dict[str, np.ndarray]:
    return {"b": np.full(64, float(v), np.float32)}


def _cli(*argv: str) -> None:
    from rlx.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        rc = main(list(argv))
    if rc != 0:
        raise RuntimeError(f"rlx {' '.join(argv)} failed: {rc}")


def _writers(folder: str) -> dict[str, tuple[str, Callable[[str, int], None]]]:
    """name -> (target file name, write(path, version))."""
    from rlx.backends.trace import trace_run, write_trace
    from rlx.lir.manifest import write_binding
    from rlx.lir.picture import draw_plan
    from rlx.viz.graph_svg import draw_graph
    from rlx.viz.html import draw_html

    models = {v: os.path.join(folder, f"model{v}.rlx") for v in (0, 1)}
    for v, p in models.items():
        if not os.path.exists(p):
            rlx.save(_graph(v), p, params=_params(v))
    lirs = {v: rlx.plan(_graph(v)) for v in (0, 1)}
    feed = {"x": np.ones((4, 64), np.float32)}
    x_file = os.path.join(folder, "x.npy")
    np.save(x_file, feed["x"])
    traces = {v: trace_run(_graph(v), feed, _params(v))[1] for v in (0, 1)}
    return {
        "save": ("m.rlx", lambda p, v: rlx.save(_graph(v), p, params=_params(v))),
        "html": ("g.html", lambda p, v: draw_html(_graph(v), p)),
        "dot": ("g.dot", lambda p, v: draw_graph(_graph(v), p)),
        "plan_svg": ("plan.svg", lambda p, v: draw_plan(lirs[v], p)),
        "trace": ("t.json", lambda p, v: write_trace(traces[v], p)),
        "binding": ("bind", lambda p, v: write_binding(lirs[v], p, _params(v))),
        "run_npz": ("out.npz", lambda p, v: _cli("run", models[v], "--input", f"x={x_file}", "-o", p)),
        "upstream_json": ("u.json", lambda p, v: _cli("convert", models[v], "--to", "upstream-json", "-o", p)),
    }


def _binding_state(path: str) -> str:
    doc = json.loads(open(os.path.join(path, "manifest.json"), encoding="ascii").read())
    blob = open(os.path.join(path, doc["weights_file"]), "rb").read()
    for p in doc["params"]:
        data = blob[p["file_offset"]:p["file_offset"] + p["bytes"]]
        if hashlib.sha256(data).hexdigest() != p["sha256"]:
            raise AssertionError(f"manifest {doc['module']} paired with other weights for {p['name']}")
    return doc["fingerprint"] + ":" + blob.hex()


def _state(name: str, path: str) -> str:
    """What ``path`` holds, comparable across versions; raises on a broken file."""
    if name == "save":
        g, params = rlx.load(path, with_params=True)
        return rlx.fingerprint(g) + ":" + params["b"].tobytes().hex()
    if name == "binding":
        return _binding_state(path)
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def kill_writer(name: str, folder: str, kills: int = 8, seed: int = 0) -> dict[str, int]:
    """``kills`` SIGKILLs of a process rewriting ``name``'s file; counts of what the file held after each."""
    writers = _writers(folder)
    target, write = writers[name]
    want = {}
    for v in (0, 1):
        ref = os.path.join(folder, f"ref{v}-{target}")
        write(ref, v)
        want[_state(name, ref)] = v
    path = os.path.join(folder, target)
    write(path, 0)
    rng = random.Random(seed)
    seen = {"old_or_new": 0, "writes": 0}
    for _ in range(kills):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the writer: alternate versions forever, one byte down the pipe per finished write
            os.close(r)
            try:
                i = 0
                while True:
                    i += 1
                    write(path, i % 2)
                    os.write(w, b".")
            finally:
                os._exit(1)
        os.close(w)
        time.sleep(rng.uniform(0.005, 0.15))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        with os.fdopen(r, "rb") as f:
            seen["writes"] += len(f.read())
        state = _state(name, path)  # raises if the file is broken
        if state not in want:
            raise AssertionError(f"{name}: after a kill the file is neither version")
        seen["old_or_new"] += 1
    return seen
