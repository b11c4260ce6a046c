"""Measure the torch.export reader on torch's own OpInfo database and write ``docs/torch_conformance.md``.

For every OpInfo of ``torch.testing._internal.common_methods_invocations.op_db`` (needs ``expecttest``)
a few sample inputs are taken (float32, plus one int64 and one bool sample where the op supports those
dtypes), a module calling the op on them is exported with ``torch.export``, imported with ``rlx.torch``,
and run twice: through ``rlx.run`` (the reference interpreter) and through optimize -> plan ->
``compile(backend="numpy")``. Both are compared with torch eager (NaN-aware; shapes and dtypes must match;
float tolerance scaled by the output's magnitude, integers and bools exact).

A sample is ``pass`` / ``refused`` (a clear ``rlx.RlxError``) / ``crash`` (any other exception: a bug) /
``wrong`` (numbers, shape or dtype differ with no error) / ``timeout``. Samples torch.export cannot export
are ``not exported`` and ops whose torch outputs are random or uninitialised are listed with the reason; neither
counts as covered. A sample is random when its exported program calls an op that draws from torch's generator
(ATen's ``nondeterministic_seeded`` tag): OpInfo reseeds torch before such calls, so eager repeats itself, but
the numbers are torch's stream, not a function of the inputs. An op that updates an input in place (training-mode
batch norm's running statistics) is compared on those inputs too: the graph's ``input_update:`` outputs
against what torch left in them.

    python scripts/torch_conformance.py --ops abs,sort --limit 4        # a subset, printed
    python scripts/torch_conformance.py --progress /tmp/tc.jsonl --write docs/torch_conformance.md

``--progress`` appends one JSON line per op and skips ops already in the file (a long run can resume).
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

SAMPLE_SECONDS = 20  # bound on one sample (export + import + both runs)
DTYPE_SAMPLES = (("float32", 2), ("int64", 1), ("bool", 1))  # samples per dtype (at most 4 per op)
# Ops whose outputs are not a function of their inputs (torch returns random or uninitialised memory).
UNDEFINED_OUTPUT = {
    "empty": "uninitialised memory", "empty_like": "uninitialised memory", "new_empty": "uninitialised memory",
    "new_empty_strided": "uninitialised memory", "empty_strided": "uninitialised memory",
    "empty_permuted": "uninitialised memory", "nn.functional.dropout": "random (training-mode dropout)",
}
RANDOM_OPS = frozenset({  # sampling ops (others whose outputs change between two calls are found by running twice)
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal", "rand_like", "randint",
    "randint_like", "randn", "randn_like", "uniform", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout",
})


class _Timeout(BaseException):  # not an Exception: torch's own `except Exception` must not swallow it
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def _tolerance(dtype: np.dtype) -> tuple[float, float]:
    if dtype == np.float16:
        return 1e-2, 1e-2
    if dtype.kind in "fc":
        return 1.3e-4, 1e-5
    return 0.0, 0.0


def compare(got: np.ndarray, want: np.ndarray) -> str | None:
    """None when ``got`` matches ``want`` (NaN-aware, dtype- and magnitude-aware), else the difference."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {list(got.shape)} != torch {list(want.shape)}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != torch {want.dtype}"
    if want.dtype.kind not in "fc":
        bad = np.count_nonzero(got != want)
        return None if bad == 0 else f"{bad} of {want.size} elements differ"
    rtol, atol = _tolerance(want.dtype)
    finite = np.isfinite(want)
    scale = float(np.max(np.abs(want[finite]))) if finite.any() else 1.0
    ok = np.isclose(got, want, rtol=rtol, atol=atol * max(1.0, scale), equal_nan=True)
    if ok.all():
        return None
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    return f"{np.count_nonzero(~ok)} of {want.size} elements differ (max abs diff {np.nanmax(np.where(ok, 0, diff)):.3g})"


def _samples(op: Any, limit: int) -> list[tuple[str, Any]]:
    import torch

    supported = {str(d).removeprefix("torch.") for d in op.supported_dtypes("cpu")}
    out: list[tuple[str, Any]] = []
    for name, count in DTYPE_SAMPLES:
        if name not in supported:
            continue
        try:
            gen = op.sample_inputs("cpu", getattr(torch, name), requires_grad=False)
            out += [(name, s) for s in itertools.islice(gen, count)]
        except Exception:  # a sample generator torch itself cannot run here: no sample of that dtype
            continue
    return out[:limit]


def _module(op: Any, sample: Any) -> tuple[Any, list[Any]]:
    """A module whose forward takes the sample's tensors (in pytree order) and calls the op."""
    import torch
    from torch.utils import _pytree as pytree

    leaves, spec = pytree.tree_flatten((sample.input, list(sample.args), dict(sample.kwargs)))
    slots = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    tensors = [leaves[i].detach().clone() for i in slots]
    fn = op.op

    class OpModule(torch.nn.Module):
        def forward(self, *xs: Any) -> Any:
            filled = list(leaves)
            for i, x in zip(slots, xs):
                filled[i] = x
            first, args, kwargs = pytree.tree_unflatten(filled, spec)
            return fn(first, *args, **kwargs)

    return OpModule(), tensors


def _as_numpy(t: Any) -> np.ndarray:
    return t.detach().cpu().resolve_conj().resolve_neg().numpy().copy()


def _outputs(result: Any) -> list[np.ndarray]:
    import torch
    from torch.utils import _pytree as pytree

    leaves = pytree.tree_leaves(result)
    return [_as_numpy(x) if isinstance(x, torch.Tensor) else np.asarray(x) for x in leaves]


def _first_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    line = text[0] if text else type(exc).__name__
    for extra in text[1:3]:  # UnsupportedOpError lists the ops on the next lines
        if extra.strip().startswith("- "):
            line += " " + extra.strip()
    return line[:200]


def run_sample(op: Any, sample: Any) -> tuple[str, str]:
    """(status, detail) of one sample."""
    import torch

    import rlx
    from rlx.ir.errors import RlxError

    module, tensors = _module(op, sample)
    with torch.no_grad():
        try:
            mutated = [t.clone() for t in tensors]  # the op may update its inputs in place (running statistics)
            want = _outputs(module(*mutated))
            again = _outputs(module(*[t.clone() for t in tensors]))
        except Exception as exc:
            return "not exported", f"eager: {_first_line(exc)}"
    if len(want) != len(again) or any(compare(a, b) for a, b in zip(again, want)):
        return "random", "torch's outputs differ between two identical calls"
    if not want:
        return "not exported", "no tensor output"
    try:
        ep = torch.export.export(module, tuple(tensors), strict=False)
    except Exception as exc:
        return "not exported", _first_line(exc)
    drawn = _random_draws(ep)
    if drawn:  # OpInfo seeds torch's generator before each call, so eager repeats itself; rlx has no such stream
        return "random", f"draws from torch's random generator ({', '.join(drawn)})"
    feeds = [_as_numpy(t) for t in tensors]
    after = [_as_numpy(t) for t in mutated]
    try:
        g, params = rlx.torch.import_program(ep, name=op.name)
        inputs = dict(zip(g.inputs(), feeds))
        got = rlx.run(g, inputs=inputs, params=params)
        where = "rlx.run"
        problem = _mismatch(*_with_updates(g, _unit_phases(op, _tie_order(op, sample, got, want), want), want, after))
        if problem is None:
            where = "compiled numpy"
            opt, _ = rlx.optimize(g)
            exe = rlx.compile(rlx.plan(opt), backend="numpy")
            got = _unit_phases(op, _tie_order(op, sample, exe.run(inputs=inputs, params=params), want), want)
            problem = _mismatch(*_with_updates(g, got, want, after))  # same output order
    except _Timeout:
        raise
    except RlxError as exc:
        return "refused", _first_line(exc)
    except Exception as exc:
        return "crash", _first_line(exc)
    return ("pass", "") if problem is None else ("wrong", f"{where}: {problem}")


def _random_draws(ep: Any) -> list[str]:
    """The ops of an exported program that draw from torch's random generator (ATen's
    ``nondeterministic_seeded`` tag: rand, bernoulli, native_dropout, rrelu_with_noise ...)."""
    import torch

    found = set()
    for n in ep.graph.nodes:
        if n.op != "call_function" or torch.Tag.nondeterministic_seeded not in getattr(n.target, "tags", ()):
            continue
        args = {a.name: v for a, v in zip(n.target._schema.arguments, n.args)} | dict(n.kwargs)
        if args.get("train", args.get("training", True)) is False or args.get("p", args.get("dropout_p")) == 0:
            continue  # dropout / rrelu in eval mode, or dropping nothing: a function of the inputs
        found.add(str(n.target))
    return sorted(found)


def _with_updates(g: Any, got: list[np.ndarray], want: list[np.ndarray], after: list[np.ndarray]
                  ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(got, want) extended by the inputs the op mutates in place: the graph's ``input_update:`` outputs
    against the values torch left in those inputs."""
    from rlx.frontends.torch.state import input_updates

    updates = input_updates(g)
    if not updates:
        return got, want
    names = list(g.inputs())
    positions = set(updates.values())
    user = [v for i, v in enumerate(got) if i not in positions]
    return user + [got[pos] for pos in updates.values()], want + [after[names.index(name)] for name in updates]


def _tie_order(op: Any, sample: Any, got: list[np.ndarray], want: list[np.ndarray]) -> list[np.ndarray]:
    """Sort / top-k / kthvalue / mode indices of tied values are unspecified in torch (unstable sort; mode's index
    is one of the mode's positions): our indices count as torch's when they pick the same values (the values
    output, or the input read through the indices)."""
    if op.name not in ("sort", "argsort", "topk", "kthvalue", "mode") or sample.kwargs.get("stable"):
        return got
    x = sample.input.detach().numpy()
    if x.ndim == 0:
        return got
    at = 1 if op.name in ("topk", "kthvalue") else 0  # topk(x, k, dim), sort(x, dim)
    args = sample.args
    dim = args[at] if len(args) > at and isinstance(args[at], int) else sample.kwargs.get("dim", -1)
    i = len(got) - 1  # the indices are the last output
    picked = [np.expand_dims(idx, dim) if idx.ndim < x.ndim else idx for idx in (got[i], want[i])]  # kthvalue drops dim
    if got[i].shape == want[i].shape and np.array_equal(np.take_along_axis(x, picked[0], dim),
                                                        np.take_along_axis(x, picked[1], dim), equal_nan=x.dtype.kind == "f"):
        got = [*got[:i], want[i]]
    return got


_EIGENVECTORS = {"linalg.eig": 1, "linalg.eigh": 1}  # output index of the eigenvectors


def _unit_phases(op: Any, got: list[np.ndarray], want: list[np.ndarray]) -> list[np.ndarray]:
    """Eigenvectors are unique up to a unit factor per column (a sign for real ones), which LAPACK builds choose
    differently: where each of our columns is torch's column times a unit factor, take torch's phase. Anything
    else (another vector, a scaled one) is compared as it is."""
    i = _EIGENVECTORS.get(op.name)
    if i is None or len(got) != len(want) or got[i].shape != want[i].shape or not got[i].size:
        return got
    dot = np.sum(np.conj(got[i].astype(complex)) * want[i], axis=-2, keepdims=True)
    if not np.allclose(np.abs(dot), 1, rtol=1e-3):
        return got
    fixed = got[i] * dot / np.abs(dot)
    return [*got[:i], (fixed if got[i].dtype.kind == "c" else fixed.real).astype(got[i].dtype), *got[i + 1:]]


def _mismatch(got: list[np.ndarray], want: list[np.ndarray]) -> str | None:
    if len(got) != len(want):
        return f"{len(got)} outputs, torch has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        problem = compare(g, w)
        if problem:
            return f"output {i}: {problem}"
    return None


def _undefined_reason(name: str) -> str | None:
    if name in UNDEFINED_OUTPUT:
        return UNDEFINED_OUTPUT[name]
    if name in RANDOM_OPS:
        return "random"
    return None


def run_op(op: Any, limit: int) -> dict[str, Any]:
    name = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
    reason = _undefined_reason(op.name)
    if reason:
        return {"op": name, "base": op.name, "undefined": reason, "samples": []}
    results = []
    for dtype, sample in _samples(op, limit):
        signal.alarm(SAMPLE_SECONDS)
        try:
            status, detail = run_sample(op, sample)
        except _Timeout:
            status, detail = "timeout", f"over {SAMPLE_SECONDS} s"
        except Exception as exc:  # sample construction itself failed
            status, detail = "not exported", _first_line(exc)
        finally:
            signal.alarm(0)
        results.append({"dtype": dtype, "status": status, "detail": detail})
    return {"op": name, "base": op.name, "samples": results}


# ----------------------------------------------------------------------------------------- report
COUNTED = ("pass", "refused", "crash", "wrong", "timeout")


def render(records: list[dict[str, Any]], torch_version: str, pending: list[str] | None = None) -> str:
    covered = [r for r in records if any(s["status"] in COUNTED for s in r["samples"])]
    totals: Counter[str] = Counter(s["status"] for r in covered for s in r["samples"] if s["status"] in COUNTED)
    n = sum(totals.values())
    passed = totals["pass"]
    lines = [
        "# torch OpInfo conformance (torch.export reader)",
        "",
        "Generated by `python scripts/torch_conformance.py --write docs/torch_conformance.md`; do not edit by hand.",
        f"Every OpInfo of torch {torch_version}'s `op_db` is sampled (float32, plus one int64 and one bool sample where",
        "the op supports them; at most 4 per op), exported with `torch.export`, imported with `rlx.torch` and run",
        "through `rlx.run` and optimize -> plan -> `compile(backend=\"numpy\")`; both must match torch eager",
        "(NaN-aware; same shape and dtype; floats within rtol 1.3e-4 and atol 1e-5 times the output's magnitude;",
        "integers and bools exact). `refused` is a clear `rlx.RlxError`; `crash` is any other exception; `wrong`",
        "is a difference without an error. Samples torch.export cannot export and ops with random or",
        "uninitialised outputs are listed at the end and not counted.",
        "",
        f"**{passed} passed / {totals['refused']} refused / {totals['crash']} crashed / {totals['wrong']} wrong / "
        f"{totals['timeout']} timed out of {n} samples ({100.0 * passed / max(n, 1):.1f}% passed) over "
        f"{len(covered)} ops.**",
        "",
        "## By op (ops with a sample not passed)",
        "",
        "| op | passed | refused | crashed | wrong | reason (first not passed) |",
        "|---|---|---|---|---|---|",
    ]
    clean = []
    for r in sorted(covered, key=lambda r: r["op"]):
        c = Counter(s["status"] for s in r["samples"])
        bad = [s for s in r["samples"] if s["status"] in COUNTED and s["status"] != "pass"]
        if not bad:
            clean.append(r["op"])
            continue
        reason = f"{bad[0]['dtype']}: {bad[0]['detail']}".replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r['op']} | {c['pass']} | {c['refused']} | {c['crash']} | {c['wrong'] + c['timeout']} | {reason} |")
    lines += ["", f"## Ops with every sample passed ({len(clean)})", "", ", ".join(clean) or "(none)", ""]
    undefined = [(r["op"], r["undefined"]) for r in records if r.get("undefined")]
    drawn = [r for r in records if any(s["status"] == "random" for s in r["samples"])]
    for r in drawn:  # samples that draw random numbers; the op's other samples (if any) are counted above
        n_random = sum(s["status"] == "random" for s in r["samples"])
        detail = next(s["detail"] for s in r["samples"] if s["status"] == "random")
        undefined.append((r["op"], f"{n_random} of {len(r['samples'])} samples: {detail}"))
    lines += ["## Not counted: random or uninitialised outputs", "", "| op | reason |", "|---|---|"]
    lines += [f"| {op} | {why} |" for op, why in sorted(undefined)]
    rest = [r for r in records if not r.get("undefined") and r not in covered and r not in drawn]
    lines += ["", f"## Not counted: not exported by torch.export ({len(rest)} ops)", "", "| op | reason |", "|---|---|"]
    for r in sorted(rest, key=lambda r: r["op"]):
        why = r["samples"][0]["detail"] if r["samples"] else "no float32 / int64 / bool sample"
        lines.append(f"| {r['op']} | {why.replace('|', '/')} |")
    if pending:
        lines += ["", f"## Not run in this pass ({len(pending)} ops; the run was stopped at its time budget)", "",
                  ", ".join(sorted(pending))]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="comma-separated OpInfo names (default: all)")
    parser.add_argument("--limit", type=int, default=4, help="samples per op (default 4)")
    parser.add_argument("--progress", type=Path, help="JSON-lines file: results appended per op, done ops skipped")
    parser.add_argument("--write", type=Path, help="write the Markdown report here")
    parser.add_argument("--seconds", type=int, default=SAMPLE_SECONDS, help="time bound per sample")
    parser.add_argument("--report-only", action="store_true", help="run nothing: write the report from --progress")
    ns = parser.parse_args(argv)

    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    import rlx.torch  # noqa: F401

    globals()["SAMPLE_SECONDS"] = ns.seconds
    signal.signal(signal.SIGALRM, _alarm)
    torch.manual_seed(0)
    wanted = set(ns.ops.split(",")) if ns.ops else None
    records: list[dict[str, Any]] = []
    done: set[str] = set()
    if ns.progress and ns.progress.exists():
        latest = {}  # a re-run op appends a new record: the last one wins
        for line in ns.progress.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                latest[record["op"]] = record
        records = list(latest.values())
        if wanted is not None:  # the named ops are run again; their new records win
            records = [r for r in records if r["op"] not in wanted and r.get("base") not in wanted]
        done = {r["op"] for r in records}
    for op in [] if ns.report_only else op_db:
        name = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        if wanted is not None and op.name not in wanted and name not in wanted:
            continue
        if name in done:
            continue
        start = time.perf_counter()
        record = run_op(op, ns.limit)
        record["seconds"] = round(time.perf_counter() - start, 2)
        records.append(record)
        if ns.progress:
            with ns.progress.open("a") as f:
                f.write(json.dumps(record) + "\n")
        if not ns.write:
            statuses = ", ".join(f"{s['dtype']}:{s['status']}" + (f" ({s['detail']})" if s["detail"] else "")
                                 for s in record["samples"])
            print(f"{name}: {record.get('undefined') or statuses}", flush=True)
    if wanted is not None:
        records = [r for r in records if r["op"] in wanted or r.get("base") in wanted]
    if ns.write:
        seen = {r["op"] for r in records}
        pending = [] if wanted is not None else [op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
                                                 for op in op_db]
        text = render(records, torch.__version__.split("+")[0], [name for name in pending if name not in seen])
        ns.write.write_text(text)
        print(text.splitlines()[11])
    return 0


if __name__ == "__main__":
    sys.exit(main())
