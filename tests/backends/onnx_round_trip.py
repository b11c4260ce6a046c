"""Node-suite round trip: each case rlx passes, exported back by ``rlx.onnx.export`` and run.

:func:`round_trip_case` imports a case as shipped (``rlx.onnx.import_runnable``, so shape-like
inputs are value-specialised), runs it once, exports the graph it imported (specialised values
folded in; at the opset an element type needs when the exporter asks for one), runs
``onnx.checker.check_model(full_check=True)`` and compares onnxruntime on the
exported file with the case's shipped outputs at the case's tolerance. Where onnxruntime has no
kernel for a valid model (``NOT_IMPLEMENTED``: bf16 arithmetic, float64 Conv ...) or cannot take
its element type from NumPy (bfloat16), onnx's reference evaluator runs the exported file instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

import rlx.onnx
from rlx.frontends.onnx import conformance

#: what the exporter may refuse: ONNX has no exact equivalent at the exporter's opset
ALLOWED_REFUSALS = re.compile(r"needs opset \d+|has no ONNX equivalent")


NEEDS_OPSET = re.compile(r"element type \S+ needs opset (\d+)")
#: onnxruntime's limits, not the model's: a kernel it lacks, or an element type its Python binding cannot pass
ORT_GAPS = re.compile(r"NOT_IMPLEMENTED|Numpy_type \d+ can't be converted|No corresponding Numpy type")


@dataclass
class Trip:
    name: str
    status: str  # passed / refused / failed / skipped (rlx does not pass the case itself)
    reason: str = ""
    oracle: str = "onnxruntime"


def _outputs(model, feed):
    import onnxruntime as ort

    try:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, {i.name: feed[i.name] for i in sess.get_inputs()}), "onnxruntime"
    except Exception as exc:
        if not ORT_GAPS.search(str(exc)):
            raise
    from onnx.reference import ReferenceEvaluator

    names = [i.name for i in model.graph.input]
    return ReferenceEvaluator(model).run(None, {n: feed[n] for n in names}), "onnx.reference"


def round_trip_case(case) -> Trip:
    import onnx

    if conformance.run_case(case).status != "passed":
        return Trip(case.name, "skipped")
    model = conformance._model_of(case)
    init = {t.name for t in model.graph.initializer}
    names = [vi.name for vi in model.graph.input if vi.name not in init]
    inputs, outputs = conformance._datasets(case)[0]
    feed = dict(zip(names, (conformance._array(v) for v in inputs)))
    want = [conformance._array(v) for v in outputs]
    runnable = rlx.onnx.import_runnable(model)
    runnable.run(feed)
    try:
        try:
            exported = rlx.onnx.export(runnable.graph, runnable.params)
        except rlx.onnx.OnnxUnsupported as exc:  # an element type of a later opset: export at that one
            later = NEEDS_OPSET.search(str(exc))
            if later is None:
                raise
            exported = rlx.onnx.export(runnable.graph, runnable.params, opset=int(later.group(1)))
        onnx.checker.check_model(exported, full_check=True)
        got, oracle = _outputs(exported, feed)
    except rlx.onnx.OnnxUnsupported as exc:
        return Trip(case.name, "refused", str(exc).splitlines()[0])
    except Exception as exc:
        return Trip(case.name, "failed", f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    if len(got) != len(want):
        return Trip(case.name, "failed", f"{len(got)} outputs, expected {len(want)}", oracle)
    for i, (a, e) in enumerate(zip(got, want)):
        a = np.asarray(a)
        if a.dtype == np.uint8 and e.dtype.itemsize == 1 and conformance._is_float(e.dtype):
            a = a.view(e.dtype)  # onnxruntime's binding returns float8 as its bytes
        if a.dtype != e.dtype or a.shape != e.shape:
            return Trip(case.name, "failed", f"output {i}: {a.dtype}{list(a.shape)}, expected {e.dtype}{list(e.shape)}", oracle)
        try:
            if conformance._is_float(e.dtype):
                wide = np.complex128 if e.dtype.kind == "c" else np.float64
                np.testing.assert_allclose(a.astype(wide), e.astype(wide), rtol=case.rtol, atol=case.atol)
            else:
                np.testing.assert_array_equal(a, e)
        except (AssertionError, TypeError, ValueError) as exc:
            lines = [ln.strip() for ln in str(exc).splitlines() if "Mismatch" in ln or "Max abs" in ln]
            return Trip(case.name, "failed", f"output {i} differs: " + "; ".join(lines[:2]), oracle)
    return Trip(case.name, "passed", oracle=oracle)
