"""The op table in Markdown, generated from the registry (``docs/ops.md``)."""

from __future__ import annotations

from rlx.ir.attrs import REQUIRED, AttrSpec
from rlx.ir.opdef import VARIADIC, OpDef, all_ops


def _default(spec: AttrSpec) -> str:
    if spec.default is REQUIRED:
        return "required"
    value = spec.default
    return f"`{getattr(value, 'value', value)!r}`".replace("'", '"')


def _arity(op: OpDef) -> str:
    if op.arity == VARIADIC:
        return f"variadic (≥ {op.min_arity})"
    if callable(op.arity):
        return "depends on attributes"
    return str(op.arity)


def _section(op: OpDef) -> list[str]:
    lines = [f"### `{op.name}`", "", f"*family* {op.family} · *level* {op.level} · *operands* "
             f"{', '.join(op.operands) or '—'} ({_arity(op)})"]
    if op.flags:
        lines[-1] += " · *flags* " + ", ".join(sorted(op.flags))
    lines += ["", op.doc.strip(), ""]
    if op.attrs:
        lines += ["| attribute | kind | default | allowed |", "|---|---|---|---|"]
        for key, spec in op.attrs.items():
            allowed = ", ".join(f"`{c}`" for c in spec.choices) if spec.choices else ""
            kind = spec.kind + (" or null" if spec.optional else "")
            lines.append(f"| `{key}` | {kind} | {_default(spec)} | {allowed} |")
        lines.append("")
    if op.methods:
        lines += ["Builder methods: " + ", ".join(f"`g.{m}`" for m in op.methods), ""]
    return lines


def render_op_table() -> str:
    ops = [op for op in all_ops() if op.family not in ("test", "custom")]
    families: dict[str, list[OpDef]] = {}
    for op in ops:
        families.setdefault(op.family, []).append(op)
    lines = ["# rlx op table", "", "Generated from the op registry by `python scripts/gen_ops_doc.py`; "
             "do not edit by hand. A test fails when this file is out of date.", "",
             f"{len(ops)} ops in {len(families)} families.", ""]
    for family in sorted(families):
        lines += [f"## {family}", ""]
        for op in families[family]:
            lines += _section(op)
    return "\n".join(lines).rstrip() + "\n"
