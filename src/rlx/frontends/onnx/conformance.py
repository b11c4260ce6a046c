"""ONNX backend-test conformance: every node case of ``onnx.backend.test`` through rlx.

Each case is imported exactly as shipped (its declared input types, nothing bound) with
:func:`rlx.onnx.import_runnable`, run with the numpy backend and compared with the case's expected outputs at its own
``rtol`` / ``atol`` (dtype and shape must match too). A case is

* **passed** when every output matches;
* **unsupported** when the import refuses it (an op type without converter, an element type
  rlx lacks, sequence / map / optional values, an attribute combination not modelled);
* **failed** otherwise (wrong numbers, a crash), with the reason.

Shape-like operands fed as graph inputs (``Reshape``'s shape, ``Slice``'s starts, a Reduce's
axes …) go through the run-time mechanism of :mod:`rlx.frontends.onnx.runnable`: the graph is
imported and compiled once per set of those inputs' values (value specialisation).

``python -m rlx.frontends.onnx.conformance --write docs/onnx_conformance.md`` regenerates
the report; ``--check`` compares the passed count with the baseline recorded in it.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np

from rlx.ir.atomic import write_text

REPORT = "docs/onnx_conformance.md"
_BASELINE = re.compile(r"^Baseline: (\d+) passed", re.M)


@dataclass
class Result:
    name: str
    op_type: str
    status: str  # passed / failed / unsupported
    reason: str = ""


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


_OP_NAMES: dict[str, str] | None = None


def op_type_of(case) -> str:
    """The ONNX op type a backend test case exercises (by its name; expanded cases count for their op)."""
    global _OP_NAMES
    import onnx

    if _OP_NAMES is None:
        _OP_NAMES = {}
        for s in onnx.defs.get_all_schemas_with_history():
            _OP_NAMES.setdefault(_snake(s.name), s.name)
            _OP_NAMES.setdefault(s.name.lower(), s.name)
    body = case.name[len("test_"):] if case.name.startswith("test_") else case.name
    best = ""
    for snake in _OP_NAMES:
        if (body == snake or body.startswith(snake + "_")) and len(snake) > len(best):
            best = snake
    if best:
        return _OP_NAMES[best]
    ops = [n.op_type for n in _model_of(case).graph.node if n.op_type != "Constant"]
    return Counter(ops).most_common(1)[0][0] if ops else "Constant"


def load_model_tests_of(kind: str) -> list:
    """onnx's shipped backend test cases of one kind ("node", "pytorch-converted", "pytorch-operator", "simple")."""
    import warnings

    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_model_tests(kind=kind)


def load_cases(pattern: str | None = None) -> list:
    cases = load_model_tests_of("node")
    if pattern:
        rx = re.compile(pattern)
        cases = [c for c in cases if rx.search(c.name)]
    return cases


def _model_of(case):
    import onnx

    if case.model is not None:
        return case.model
    return onnx.load(f"{case.model_dir}/model.onnx")


def _datasets(case):
    if case.data_sets:
        return case.data_sets
    import glob

    import onnx
    from onnx import numpy_helper

    out = []
    for d in sorted(glob.glob(f"{case.model_dir}/test_data_set*")):
        ins = [numpy_helper.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob(f"{d}/input_*.pb"))]
        outs = [numpy_helper.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob(f"{d}/output_*.pb"))]
        out.append((ins, outs))
    return out


def _array(v):
    """Test data as NumPy (TensorProto data is converted; sequences / optionals are kept as they are)."""
    if hasattr(v, "data_type") and hasattr(v, "dims"):
        from onnx import numpy_helper

        from rlx.ir.onnx_format import rlx_dtype

        rlx_dtype(v.data_type, "test data: ")
        return numpy_helper.to_array(v)
    if isinstance(v, np.generic):
        return np.asarray(v)
    return v


def _is_float(dtype: np.dtype) -> bool:
    from rlx.ir.dtype import DType, DTypeError

    try:
        return DType.of(dtype).is_float or DType.of(dtype).is_complex
    except DTypeError:
        return dtype.kind in "fc"


def run_case(case) -> Result:
    from rlx.frontends.onnx.runnable import import_runnable
    from rlx.ir.onnx_format import OnnxUnsupported

    op = op_type_of(case)
    try:
        model = _model_of(case)
        for vi in [*model.graph.input, *model.graph.output]:
            if not vi.type.HasField("tensor_type"):
                kind = vi.type.WhichOneof("value")
                return Result(case.name, op, "unsupported", f"{kind} values (only tensors are modelled)")
        init = {t.name for t in model.graph.initializer}
        names = [vi.name for vi in model.graph.input if vi.name not in init]
        runnable = None
        for inputs, outputs in _datasets(case):
            values, outputs = [_array(v) for v in inputs], [_array(v) for v in outputs]
            if any(not isinstance(v, np.ndarray) for v in [*values, *outputs]):
                return Result(case.name, op, "unsupported", "sequence / optional values (only tensors are modelled)")
            if any(v.dtype.kind in "OSU" for v in [*values, *outputs]):
                return Result(case.name, op, "unsupported", "string tensors")
            runnable = runnable or import_runnable(model)
            got = runnable.run(dict(zip(names, values)))
            if len(got) != len(outputs):
                return Result(case.name, op, "failed", f"{len(got)} outputs, expected {len(outputs)}")
            for i, (a, e) in enumerate(zip(got, outputs)):
                if a.dtype != e.dtype:
                    return Result(case.name, op, "failed", f"output {i}: dtype {a.dtype}, expected {e.dtype}")
                if a.shape != e.shape:
                    return Result(case.name, op, "failed", f"output {i}: shape {list(a.shape)}, expected {list(e.shape)}")
                try:
                    if _is_float(e.dtype):
                        wide = np.complex128 if e.dtype.kind == "c" else np.float64
                        np.testing.assert_allclose(a.astype(wide), e.astype(wide), rtol=case.rtol, atol=case.atol)
                    else:
                        np.testing.assert_array_equal(a, e)
                except AssertionError as exc:
                    lines = [ln for ln in str(exc).splitlines() if "Mismatch" in ln or "Max abs" in ln]
                    return Result(case.name, op, "failed", f"output {i} differs: " + "; ".join(x.strip() for x in lines[:2]))
        return Result(case.name, op, "passed")
    except OnnxUnsupported as exc:
        return Result(case.name, op, "unsupported", str(exc).splitlines()[0][:200])
    except Exception as exc:
        detail = " ".join(line.strip() for line in str(exc).splitlines()[:2])  # a header line names the graph only
        return Result(case.name, op, "failed", f"{type(exc).__name__}: {detail}"[:200])


def _run_named(name: str) -> Result:
    cases = _CASES_BY_NAME
    return run_case(cases[name])


_CASES_BY_NAME: dict = {}


def run_all(cases: list, jobs: int = 1) -> list[Result]:
    global _CASES_BY_NAME
    if jobs <= 1:
        return [run_case(c) for c in cases]
    import multiprocessing as mp

    _CASES_BY_NAME = {c.name: c for c in cases}
    ctx = mp.get_context("fork")
    with ctx.Pool(jobs) as pool:
        return pool.map(_run_named, [c.name for c in cases], chunksize=8)


def summarize(results: list[Result]) -> Counter:
    return Counter(r.status for r in results)


#: (category, pattern on "status: reason") for the report's failure summary; the first match wins
REASON_CLASSES: tuple[tuple[str, re.Pattern], ...] = tuple((name, re.compile(rx)) for name, rx in (
    ("static-shape requirement (an operand needed at import time)", r"must be static"),
    ("element type without an rlx equivalent", r"has no rlx equivalent"),
    ("op type without a converter", r"unsupported ONNX op types"),
    ("sequence / map / optional values", r"sequence|optional|non-tensor| values \(only tensors"),
    ("string tensors", r"string tensors"),
    ("numbers differ beyond the case's tolerance", r"^failed: output \d+ differs"),
    ("wrong dtype / shape / output count", r"^failed: (output \d+: (dtype|shape)|\d+ outputs)"),
    ("error while importing or running", r"^failed: "),
    ("attribute / mode / operand not modelled", r"^unsupported: "),
))


def reason_class(r: Result) -> str:
    """The summary category of a case that did not pass (see :data:`REASON_CLASSES`)."""
    text = f"{r.status}: {r.reason}"
    return next(name for name, rx in REASON_CLASSES if rx.search(text))


def render(results: list[Result], seconds: float | None = None) -> str:
    counts = summarize(results)
    total = len(results)
    by_op: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        by_op[r.op_type].append(r)
    lines = [
        "# ONNX backend-test conformance (node cases)",
        "",
        "Generated by `python -m rlx.frontends.onnx.conformance --write docs/onnx_conformance.md`; do not edit by hand.",
        f"Every case of `onnx.backend.test.loader.load_model_tests(kind=\"node\")` (onnx {_onnx_version()}) is imported "
        "exactly as shipped",
        "(declared input types, nothing bound) with `rlx.onnx.import_runnable`, run with the numpy backend and compared",
        "with the case's outputs at the case's rtol / atol (dtype and shape must match). Shape-like operands fed as",
        "inputs (a Reshape's shape, a Reduce's axes ...) are value-specialised at run time. Cases left out on principle",
        "(string tensors, sequence / map / optional values) count as not passed.",
        "",
        f"Baseline: {counts['passed']} passed",
        "",
        f"**{counts['passed']} passed / {counts['failed']} failed / {counts['unsupported']} unsupported of {total} cases "
        f"({100.0 * counts['passed'] / max(total, 1):.1f}% passed) over {len(by_op)} op types.**",
        "",
    ]
    if seconds is not None:
        lines += [f"Full run: {seconds:.0f} s.", ""]
    classes = Counter(reason_class(r) for r in results if r.status != "passed")
    lines += ["## Not passed, by reason", "", "| reason | cases |", "|---|---|"]
    lines += [f"| {name} | {classes[name]} |" for name, _ in REASON_CLASSES if classes[name]]
    lines += ["", "## By op type", ""]
    lines += ["| op type | passed | failed | unsupported | reasons (not passed) |", "|---|---|---|---|---|"]
    for op in sorted(by_op):
        rs = by_op[op]
        c = summarize(rs)
        reasons = Counter(f"{r.status}: {r.reason}" for r in rs if r.status != "passed")
        top = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[:3]  # ties by text: the report does not depend on run order
        text = "; ".join(f"{reason} (x{n})" if n > 1 else reason for reason, n in top)
        text = text.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {op} | {c['passed']} | {c['failed']} | {c['unsupported']} | {text} |")
    lines += ["", "## Cases not passed", "", "| case | op type | status | reason |", "|---|---|---|---|"]
    for r in sorted(results, key=lambda r: (r.op_type, r.name)):
        if r.status != "passed":
            reason = r.reason.replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {r.name} | {r.op_type} | {r.status} | {reason} |")
    return "\n".join(lines) + "\n"


def _onnx_version() -> str:
    import onnx

    return onnx.__version__


def baseline(path: str = REPORT) -> int | None:
    try:
        text = open(path, encoding="utf-8").read()
    except OSError:
        return None
    m = _BASELINE.search(text)
    return int(m.group(1)) if m else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", metavar="PATH", help="write the Markdown report here")
    ap.add_argument("--check", metavar="PATH", nargs="?", const=REPORT, help="fail if fewer cases pass than the baseline in PATH")
    ap.add_argument("-k", dest="pattern", help="only cases whose name matches this regex")
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    cases = load_cases(args.pattern)
    results = run_all(cases, args.jobs)
    dt = time.perf_counter() - t0
    counts = summarize(results)
    if args.verbose:
        for r in results:
            if r.status != "passed":
                print(f"{r.status:12s} {r.name}: {r.reason}")
    print(f"{counts['passed']} passed / {counts['failed']} failed / {counts['unsupported']} unsupported of {len(results)} ({dt:.1f} s)")
    if args.write:
        write_text(args.write, render(results))  # no timing in the file: it would change on every run
    if args.check:
        base = baseline(args.check)
        if base is not None and counts["passed"] < base:
            print(f"conformance regression: {counts['passed']} passed < baseline {base}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
