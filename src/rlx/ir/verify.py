"""``verify``: re-derive every node's type from its op rule and check every structural rule.

Unlike upstream (which trusts builder-declared shapes for most ops), every node is
re-inferred. All problems are collected; the error lists each with the node it concerns
and the neighbouring lines of the text form.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlx.ir.errors import RlxError, VerifyError
from rlx.ir.graph import RESULT, Graph, GraphStage, Node, infer_type
from rlx.ir.opdef import get_op, has_op
from rlx.ir.symbolic import ranges_in_effect

MAX_REPORTED = 20


def _describe(node: Node) -> str:
    label = f" {node.name!r}" if node.name else ""
    return f"node %{node.id} ({node.op}{label})"


def collect_errors(g: Graph, prefix: str = "") -> list[tuple[int | None, str]]:
    """Every broken rule in ``g`` as (node id or None, message), without raising; shape rules
    decide with ``g``'s symbol ranges (a subgraph's narrowing those of the graph holding it)."""
    with ranges_in_effect(g.symbol_ranges):
        return _collect_errors(g, prefix)


def _collect_errors(g: Graph, prefix: str) -> list[tuple[int | None, str]]:
    errors: list[tuple[int | None, str]] = []
    leaves: dict[str, int] = {}
    passed: set[tuple[Any, ...]] = set()  # memo keys of nodes whose checks passed
    for index, node in enumerate(g.nodes):
        problems: list[str] = []
        key = _memo_key(g, index, node)
        try:
            known = key is not None and key in passed
        except TypeError:  # an unhashable attribute (a subgraph): always check
            key, known = None, False
        if not known:
            _check_node(g, index, node, problems.append, leaves)
            if key is not None and not problems:
                passed.add(key)
        errors.extend((node.id, f"{prefix}{_describe(node)}: {msg}") for msg in problems)
        for attr, value in node.attrs.items():
            if isinstance(value, Graph):
                errors.extend(collect_errors(value, f"{prefix}{_describe(node)}.{attr}: "))
    for out in g.output_ids:
        if not 0 <= out < len(g.nodes):
            errors.append((None, f"{prefix}graph output %{out} does not exist"))
    return errors


def _memo_key(g: Graph, index: int, node: Node) -> tuple[Any, ...] | None:
    """Everything :func:`_check_node` reads for a non-leaf node: op, attributes (values and
    classes, so ``True`` never stands for ``1``), its type and its operand types. Nodes with
    equal keys pass or fail together, so a repeated layer is checked once (loaders, passes)."""
    if node.id != index or not node.inputs or node.op == RESULT:  # sources are cheap to check; leaf names need each
        return None  # a result node's check reads its position
    nodes = g.nodes
    for src in node.inputs:
        if src.__class__ is not int or not 0 <= src < index:
            return None
    attrs = tuple(
        (k, v.__class__, tuple(x.__class__ for x in v) if v.__class__ is tuple else None, v) for k, v in node.attrs.items()
    )
    return (node.op, attrs, node.type, node.extra_types, tuple(nodes[src].type for src in node.inputs))


def _check_node(g: Graph, index: int, node: Node, err: Callable[[str], None], leaves: dict[str, int]) -> None:
    """Append to ``err`` every rule ``node`` breaks."""
    if node.id != index:
        err(f"id {node.id} stored at position {index}")
    if not has_op(node.op):
        err(f"unknown op {node.op!r}")
        return
    if node.op == RESULT:
        _check_result(g, index, node, err)
        return
    opdef = get_op(node.op)
    if opdef.level == "hir" and g.stage is not GraphStage.HIR:
        err(f"HIR op {node.op!r} is not allowed in a {g.stage.value.upper()} graph")
    bad_ref = False
    for src in node.inputs:
        if not 0 <= src < len(g.nodes):
            err(f"operand %{src} does not exist")
            bad_ref = True
        elif src >= node.id:
            err(f"operand %{src} is not defined before its use (forward reference)")
            bad_ref = True
    try:
        attrs = opdef.check_attrs(node.attrs, node.op)
    except RlxError as exc:
        err(f"bad attributes: {exc}")
        return
    if attrs != dict(node.attrs):
        err(f"attributes {dict(node.attrs)} are not canonical (expected {attrs})")
    if node.op in ("input", "param"):
        leaf = node.attrs["name"]
        if leaf in leaves:
            err(f"name {leaf!r} already used by node %{leaves[leaf]}")
        leaves[leaf] = node.id
    if bad_ref:
        return
    try:
        inferred = infer_type(opdef, [g.nodes[i].type for i in node.inputs], attrs, node.op)
    except RlxError as exc:
        err(f"type rule failed: {exc}")
        return
    if inferred.__class__ is tuple:
        if inferred != node.types:
            err(f"stored result types {list(map(str, node.types))} differ from the ones the op rule gives, {list(map(str, inferred))}")
    elif node.extra_types:
        err(f"stores {node.num_results} result types, but the op rule gives one result, {inferred}")
    elif inferred != node.type:
        err(f"stored type {node.type} differs from the type the op rule gives, {inferred}")
    for r in range(1, node.num_results):
        at = index + r
        follower = g.nodes[at] if at < len(g.nodes) else None
        if follower is None or follower.op != RESULT or follower.attrs.get("index") != r or follower.inputs != (index,):
            err(f"result {r} must be held by node %{at} = result(%{index}) {{index={r}}}")


def _check_result(g: Graph, index: int, node: Node, err: Callable[[str], None]) -> None:
    """A ``result`` node: ``result(%k) {index=r}`` at id k + r, typed as result r of node %k."""
    r = node.attrs.get("index")
    if set(node.attrs) != {"index"} or r.__class__ is not int or r < 1:
        err(f"a result node has exactly one attribute, index (an int >= 1), got {dict(node.attrs)}")
        return
    src = index - r
    if node.inputs != (src,) or src < 0:
        err(f"result {r} at %{index} must read node %{src} (result r of node k is node k + r), reads {list(node.inputs)}")
        return
    producer = g.nodes[src]
    if producer.num_results <= r:
        err(f"node %{src} ({producer.op}) has {producer.num_results} result(s), so it has no result {r}")
    elif producer.extra_types[r - 1] != node.type:
        err(f"stored type {node.type} differs from result {r} of node %{src}, {producer.extra_types[r - 1]}")


def verify(g: Graph) -> Graph:
    """Raise :class:`rlx.VerifyError` listing every broken rule; return ``g`` if it is valid."""
    errors = collect_errors(g)
    if not errors:
        return g
    from rlx.ir.text import print_node

    lines = [f"graph {g.name!r} failed verification ({len(errors)} problem(s)):"]
    for node_id, msg in errors[:MAX_REPORTED]:
        lines.append(f"  - {msg}")
        if node_id is not None and 0 <= node_id < len(g.nodes):
            for near in range(max(0, node_id - 1), min(len(g.nodes), node_id + 2)):
                marker = ">>" if near == node_id else "  "
                try:
                    text = print_node(g.nodes[near])
                except Exception as exc:  # a broken node must not hide the report
                    text = f"%{near} = <unprintable: {exc}>"
                lines.append(f"      {marker} {text}")
    if len(errors) > MAX_REPORTED:
        lines.append(f"  … and {len(errors) - MAX_REPORTED} more")
    raise VerifyError("\n".join(lines), [m for _, m in errors])
