"""The ``"lir"`` document codec: an LirModule is its graph plus its buffer plan and plan options.

Loading validates every field's type, rebuilds the plan and runs the independent checker
(:func:`rlx.lir.check`) against the loaded graph, so a tampered plan is a FormatError.
"""

from __future__ import annotations

from typing import Any

from rlx.ir.errors import FormatError, RlxError
from rlx.ir.serialize import Decoder, Encoder, register_codec
from rlx.lir.plan import BufferPlan, LirModule, check

_PLAN_LISTS = ("schedule", "assignments", "view_aliases", "inplace", "lifetimes", "phases", "dynamic_symbols", "outside",
               "unplanned")
_PLAN_INTS = ("alignment", "arena_size", "lower_bound", "peak_step")


def _options_doc(options: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in sorted(options.items()):
        if isinstance(value, tuple):
            value = list(value)
        if isinstance(value, dict):
            value = {str(k): int(v) for k, v in sorted(value.items())}
        out[key] = value
    return out


def encode_lir(lir: LirModule, enc: Encoder) -> dict:
    return {"graph": enc.graph(lir.graph), "plan": lir.plan.to_dict(), "options": _options_doc(lir.options)}


def _int_rows(dec: Decoder, rows: Any, width: int, path: str, strings: tuple[int, ...] = ()) -> None:
    if type(rows) is not list:
        raise dec.error(path, "expected list")
    for i, row in enumerate(rows):
        if width and (type(row) is not list or len(row) != width):
            raise dec.error(f"{path}[{i}]", f"expected a list of {width} values")
        cells = row if width else [row]
        for j, cell in enumerate(cells):
            want = str if j in strings else int
            if type(cell) is not want:
                raise dec.error(f"{path}[{i}]" + (f"[{j}]" if width else ""), f"expected {want.__name__}")


def decode_lir(doc: dict, dec: Decoder) -> LirModule:
    dec.keys(doc, "", ("graph", "plan", "options"))
    graph = dec.graph(doc["graph"], "graph")
    p = dec.get(doc, "plan", dict, "")
    for key in _PLAN_INTS:
        dec.int(p, key, "plan", lo=0)
    for key in _PLAN_LISTS:
        dec.list(p, key, "plan")
    _int_rows(dec, p["schedule"], 0, "plan.schedule")
    _int_rows(dec, p["assignments"], 3, "plan.assignments")
    _int_rows(dec, p["view_aliases"], 3, "plan.view_aliases")
    _int_rows(dec, p["inplace"], 2, "plan.inplace")
    _int_rows(dec, p["lifetimes"], 3, "plan.lifetimes")
    _int_rows(dec, p["phases"], 2, "plan.phases", strings=(1,))
    _int_rows(dec, p["outside"], 0, "plan.outside")
    _int_rows(dec, p["unplanned"], 0, "plan.unplanned")
    options = dec.get(doc, "options", dict, "")
    try:
        plan = BufferPlan.from_dict(p)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise dec.error("plan", f"malformed buffer plan: {type(exc).__name__}: {exc}") from None
    opts = dict(options)
    if isinstance(opts.get("heuristics"), list):
        opts["heuristics"] = tuple(opts["heuristics"])
    lir = LirModule(graph, plan, opts)
    try:
        check(lir)
    except RlxError as exc:
        raise FormatError(f"plan: the loaded buffer plan does not check against its graph: {exc}") from None
    return lir


register_codec("lir", LirModule, encode_lir, decode_lir, kind="lir_module")
