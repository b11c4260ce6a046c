"""``merge_conv_branches``: the sum of convolutions that read one activation written as one convolution,
with the bound weights (an engine-backend rewrite, like :mod:`rlx.backends.engine_rewrites`).

Re-parameterizable blocks (RepVGG, MobileOne, RepGhost, FastViT, RepViT) train as parallel branches over
one input: a kxk conv, a 1x1 conv, a BatchNorm of the input itself, summed. Their authors fold the
branches into one conv before deployment; a model exported as trained keeps them all, and no engine
merges them from the file (MobileOne-S0 in onnxruntime: 226 Convs, 4.7x the time of the 43 merged
ones). After the BatchNorms are folded (:func:`rlx.opt.fold_affine.fold_conv_affine`: a branch is then
``conv(x, W) + T``, the input's own BatchNorm a 1x1 depthwise conv), each add tree whose terms are
convs of one activation with the same stride and dilation (and that activation itself, the identity
branch) becomes one conv: each kernel placed in a common frame (centred by its padding, its groups
embedded block-diagonally) and the kernels summed, the per-channel shifts summed into one bias; a
per-channel scale and shift after such a sum (RepViT's BatchNorm of it) folded in as well. The
result equals the sum of the branches up to rounding (f64 accumulation of the kernels); a merge that
would cost more multiply-adds than its branches (a depthwise kernel widened into a dense one) is not
made, and branches whose padding cannot share one symmetric frame stay apart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from rlx.backends.engine_rewrites import bound_param, built_by, readers
from rlx.ir.graph import Graph, Node
from rlx.opt.fold_affine import is_channel_scale
from rlx.opt.fold_weights import fresh_param_name


class _Branch(NamedTuple):
    """One conv term of a sum: its kernel [Cout, Cin / groups, kh, kw], groups and symmetric padding."""

    weight: np.ndarray
    groups: int
    padding: tuple[int, int]
    node: int | None  # the conv node; None for the identity branch (the activation itself)

    @property
    def macs(self) -> int:
        return int(np.prod(self.weight.shape))


def _terms(g: Graph, root: Node, uses: dict[int, list[int]]) -> tuple[list[int], list[int]]:
    """The leaves of the add tree under ``root`` (inner adds of root's type read once) and its inner adds."""
    leaves, inner, todo = [], [], list(root.inputs)
    while todo:
        vid = todo.pop()
        node = g.node(vid)
        if built_by(node, "add") and node.type == root.type and len(uses.get(vid, [])) == 1:
            inner.append(vid)
            todo.extend(node.inputs)
        else:
            leaves.append(vid)
    return leaves, inner


def _conv_branch(g: Graph, node: Node, root: Node, uses: dict[int, list[int]],
                 params: Mapping[str, np.ndarray]) -> tuple[tuple, _Branch] | None:
    """(group key, branch) of a conv term: a float conv2d read only by the sum, its kernel a bound param."""
    if not built_by(node, "conv2d") or node.type != root.type or len(uses.get(node.id, [])) != 1:
        return None
    name = bound_param(g, node.inputs[1], params, 4)
    if name is None:
        return None
    a = node.attrs
    key = (node.inputs[0], tuple(a["stride"]), tuple(a["dilation"]))
    return key, _Branch(np.asarray(params[name]), int(a["groups"]), (int(a["padding"][0]), int(a["padding"][1])), node.id)


def _shift(g: Graph, vid: int, root: Node, params: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """A term that is a bound per-channel shift of the sum ([C, 1, 1] or [1, C, 1, 1]), as [C, 1, 1]."""
    channels = root.shape[1]
    for rank in (3, 4):
        name = bound_param(g, vid, params, rank)
        if name is not None and g.node(vid).dtype == root.dtype and params[name].size == channels \
                and params[name].shape[-3:] == (channels, 1, 1):
            return np.asarray(params[name]).reshape(channels, 1, 1)
    return None


def _frame(branches: list[_Branch], dilation: tuple[int, ...]) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The merged kernel size and padding: every kernel placed at its padding's offset, or None when one
    is not a whole number of dilated taps from the widest padding."""
    size, pad = [], []
    for axis in (0, 1):
        p = max(b.padding[axis] for b in branches)
        offsets = [p - b.padding[axis] for b in branches]
        if any(o % dilation[axis] for o in offsets):
            return None
        size.append(max(o // dilation[axis] + b.weight.shape[2 + axis] for o, b in zip(offsets, branches)))
        pad.append(p)
    return (size[0], size[1]), (pad[0], pad[1])


def _static_chw(node: Node) -> bool:
    """Channels and spatial dims known (the batch may be symbolic: ONNX files as shipped)."""
    return all(isinstance(d, int) for d in list(node.shape)[1:])


def _out_size(n: int, k: int, s: int, p: int, d: int) -> int:
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _merged_kernel(branches: list[_Branch], groups: int, size: tuple[int, int], pad: tuple[int, int],
                   dilation: tuple[int, ...], cin: int) -> np.ndarray:
    """The branches' kernels summed in one [Cout, Cin / groups, kh, kw] frame (f64)."""
    cout = branches[0].weight.shape[0]
    out = np.zeros((cout, cin // groups, *size))
    o = np.arange(cout)
    for b in branches:
        width = cin // b.groups
        # output channel o reads input channels [its group's start, + width) in the branch; in the merged
        # conv (coarser groups: ``groups`` divides b.groups) those sit at this offset within o's group
        local = (o // (cout // b.groups)) * width - (o // (cout // groups)) * (cin // groups)
        top, left = ((pad[a] - b.padding[a]) // dilation[a] for a in (0, 1))
        kh, kw = b.weight.shape[2:]
        out[o[:, None], local[:, None] + np.arange(width)[None, :], top:top + kh, left:left + kw] += b.weight
    return out


def _partitions(branches: list[_Branch], groups_of_input: int) -> list[list[_Branch]]:
    """The branches merged together: all of them when that costs no more multiply-adds than running them
    apart, else those of each groups value (the identity branch, free in any grouping, with the first)."""
    groups = math.gcd(*(b.groups for b in branches))
    kh = max(b.weight.shape[2] for b in branches)
    kw = max(b.weight.shape[3] for b in branches)
    cout = branches[0].weight.shape[0]
    if cout * (groups_of_input // groups) * kh * kw <= sum(b.macs for b in branches):
        return [branches]
    by_groups: dict[int, list[_Branch]] = {}
    for b in sorted(branches, key=lambda b: b.node is None):  # the identity branch last, into the first partition
        if b.node is None:
            next(iter(by_groups.values())).append(b)
        else:
            by_groups.setdefault(b.groups, []).append(b)
    return list(by_groups.values())


_Conv = tuple[int, np.ndarray, int, tuple[int, int], tuple[int, ...], tuple[int, ...]]


class _Plan(NamedTuple):
    """How one sum is rewritten: the merged convs (input id, kernel, groups, padding, stride, dilation),
    the terms kept as they are, the summed shift, the nodes the merge absorbs and the node whose value
    the rewrite computes (the sum, or the last per-channel step after it that it absorbed)."""

    convs: list[_Conv]
    kept: list[int]
    shift: np.ndarray | None
    absorbed: set[int]
    result: int


def _channel_scale(g: Graph, node: Node, params: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """The [C] scale of a bound 1x1 depthwise conv2d (stride 1, no padding): a BatchNorm after the sum, as
    :func:`rlx.opt.fold_affine.fold_conv_affine` writes it in its depthwise form."""
    if not is_channel_scale(node, g.node(node.inputs[0])):
        return None
    name = bound_param(g, node.inputs[1], params, 4)
    return None if name is None or params[name].shape != (node.shape[1], 1, 1, 1) else np.asarray(params[name]).reshape(-1)


def _absorb_after(g: Graph, root: Node, uses: dict[int, list[int]], params: Mapping[str, np.ndarray],
                  convs: list[_Conv], shift: np.ndarray | None) -> tuple[list[_Conv], np.ndarray | None, list[int]]:
    """RepViT's ``bn(conv(x) + conv1(x) + x)``: the per-channel scales and shifts after a sum of only convs
    and shifts, folded into the merged kernels and the shift; the nodes absorbed, in order."""
    absorbed: list[int] = []
    cur = root
    while len(uses.get(cur.id, [])) == 1 and uses[cur.id][0] >= 0:
        nxt = g.node(uses[cur.id][0])
        if nxt.type != root.type or nxt.inputs[0] != cur.id:
            break
        scale = _channel_scale(g, nxt, params)
        if scale is not None:
            convs = [(x, kernel * scale[:, None, None, None], *rest) for x, kernel, *rest in convs]
            shift = None if shift is None else shift * scale[:, None, None]
        elif built_by(nxt, "add") and (extra := _shift(g, nxt.inputs[1], root, params)) is not None:
            shift = extra if shift is None else shift + extra
        else:
            break
        absorbed.append(nxt.id)
        cur = nxt
    return convs, shift, absorbed


def _plan(g: Graph, root: Node, uses: dict[int, list[int]], params: Mapping[str, np.ndarray]) -> _Plan | None:
    leaves, inner = _terms(g, root, uses)
    groups: dict[tuple, list[_Branch]] = {}
    rest, shifts = [], []
    for vid in leaves:
        found = _conv_branch(g, g.node(vid), root, uses, params)
        if found is not None:
            groups.setdefault(found[0], []).append(found[1])
            continue
        shift = _shift(g, vid, root, params)
        if shift is not None:
            shifts.append(shift)
        else:
            rest.append(vid)
    channels = root.shape[1]
    for vid in list(rest):  # the activation itself, beside convs of it that keep its shape: the identity branch
        key = next((k for k in groups if k[0] == vid and k[1] == (1, 1)), None)
        if key is not None and g.node(vid).type == root.type:
            eye = np.ones((channels, 1, 1, 1), dtype=np.float64)
            groups[key].append(_Branch(eye, channels, (0, 0), None))
            rest.remove(vid)
    convs: list[_Conv] = []
    kept, absorbed = list(rest), set(inner) | {root.id}
    merged_any = False
    for (x, stride, dilation), branches in groups.items():
        if not _static_chw(g.node(x)):
            kept += [b.node if b.node is not None else x for b in branches]
            continue
        cin = g.node(x).shape[1]
        for part in _partitions(branches, cin) if len(branches) > 1 else [branches]:
            frame = _frame(part, dilation)
            if len(part) > 1 and frame is not None and all(
                    _out_size(g.node(x).shape[2 + a], frame[0][a], stride[a], frame[1][a], dilation[a]) == root.shape[2 + a]
                    for a in (0, 1)):
                groups_merged = math.gcd(*(b.groups for b in part))
                kernel = _merged_kernel(part, groups_merged, frame[0], frame[1], dilation, cin)
                convs.append((x, kernel, groups_merged, frame[1], stride, dilation))
                absorbed |= {b.node for b in part if b.node is not None}
                merged_any = True
            else:
                kept += [b.node if b.node is not None else x for b in part]
    if not merged_any:
        return None
    shift = np.sum(shifts, axis=0) if shifts else None
    after: list[int] = []
    if not kept:
        convs, shift, after = _absorb_after(g, root, uses, params, convs, shift)
    return _Plan(convs, kept, shift, absorbed | set(after), after[-1] if after else root.id)


def merge_conv_branches(g: Graph, params: Mapping[str, np.ndarray]) -> tuple[Graph, dict[str, np.ndarray]]:
    """``(graph, params)`` with each sum of convolution branches over one activation merged (see the module
    docstring); ``g`` itself when there is none. Kernels and shifts read only by merged branches leave the
    graph and the params."""
    uses = readers(g)
    plans: dict[int, _Plan] = {}
    claimed: set[int] = set()
    for node in reversed(g.nodes):  # the outermost add of each tree first
        if node.id in claimed or not built_by(node, "add") or len(node.shape) != 4 or not node.dtype.is_float \
                or not _static_chw(node):
            continue
        plan = _plan(g, node, uses, params)
        if plan is not None and not claimed.intersection(plan.absorbed):
            plans[node.id] = plan
            claimed |= plan.absorbed
    if not plans:
        return g, dict(params)
    absorbed = set().union(*(p.absorbed for p in plans.values())) - set(plans)
    absorbed |= {n.id for n in g.nodes if n.op == "param" and uses.get(n.id)
                 and all(u in absorbed or u in plans for u in uses[n.id])}  # kernels and shifts of merged branches
    taken = {n.attrs["name"] for n in g.nodes if n.op in ("param", "input")}
    out = Graph(g.name, g.stage, g.symbol_ranges)
    env: dict[int, int] = {}
    new_params: dict[str, np.ndarray] = {}

    def bound(value: np.ndarray, stem: str, dtype) -> int:
        name = fresh_param_name(stem, taken)
        taken.add(name)
        new_params[name] = value.astype(dtype.numpy)
        return out.param(name, value.shape, dtype).id

    for node in g.nodes:
        if node.id in absorbed:
            continue
        plan = plans.get(node.id)
        if plan is None:
            env[node.id] = out.append(node.op, [env[i] for i in node.inputs], dict(node.attrs), name=node.name, prov=node.prov).id
            continue
        terms = []
        for x, kernel, groups, padding, stride, dilation in plan.convs:
            w = bound(kernel, f"conv_branches.merged{node.id}", node.dtype)
            terms.append(out.append("conv2d", [env[x], w], {"kernel_size": list(kernel.shape[2:]), "stride": list(stride),
                                                            "padding": list(padding), "dilation": list(dilation),
                                                            "groups": groups}, prov=node.prov).id)
        if plan.shift is not None:
            terms.insert(1, bound(plan.shift, f"conv_branches.shift{node.id}", node.dtype))
        terms += [env[v] for v in plan.kept]
        y = terms[0]
        for t in terms[1:]:
            y = out.append("binary", [y, t], {"op": "add"}, prov=node.prov).id
        env[plan.result] = y
    out.set_outputs([env[o] for o in g.output_ids])
    kept_names = {n.attrs["name"] for n in out.nodes if n.op == "param"}
    return out, {**{k: v for k, v in params.items() if k in kept_names}, **new_params}
