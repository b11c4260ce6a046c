"""What every command shares: reading any model file, bringing it to a stage, fixing
symbolic dims, writing ``.rlx`` files that are read back and checked, ``.npy`` inputs.

Every object :func:`rlx.save` writes is read: a :class:`rlx.Graph` (HIR or MIR), a
:class:`rlx.GraphModule` (its graph; its fusion policy is the default for lowering) and an
:class:`rlx.LirModule`. The text form (``rlx inspect --text``) is read too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlx.cli.errors import OPTIONAL_PACKAGES, CliError, MissingDependency, UsageError, prefixed, require
from rlx.cli.onnx_files import import_onnx, inputs_text, onnx_import_shapes, onnx_inputs, onnx_values, read_onnx, shape_text
from rlx.ir.errors import RlxError

__all__ = ["OPTIONAL_PACKAGES", "CliError", "MissingDependency", "UsageError", "import_onnx", "inputs_text", "onnx_import_shapes",
           "onnx_inputs", "onnx_values", "prefixed", "read_onnx", "require", "shape_text"]  # re-exported for the commands

STAGES = ("hir", "mir", "opt", "lir")
#: the ``--policy`` option of the commands that lower a HIR file
POLICY_ARG = {"choices": ("direct", "fusable"), "default": None,
              "help": "fusion policy used to lower a HIR file (default: the module's own, else direct)"}


@dataclass
class Model:
    """A model file read by a command: ``obj`` is a Graph (HIR / MIR) or an LirModule."""

    obj: Any
    params: dict[str, np.ndarray]
    path: str
    policy: str | None = None  # the saved HIR module's fusion policy
    source: str = "rlx"  # rlx / text / onnx / pt2 / json
    binding: dict[str, int] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return kind_of(self.obj)

    @property
    def graph(self) -> Any:
        return graph_of(self.obj)


def kind_of(obj: Any) -> str:
    """``hir`` / ``mir`` / ``lir`` of a Graph or LirModule."""
    import rlx

    if isinstance(obj, rlx.LirModule):
        return "lir"
    if isinstance(obj, rlx.Graph):
        return obj.stage.value
    raise CliError(f"unsupported object in file: {type(obj).__name__}")


def graph_of(obj: Any) -> Any:
    return obj.graph if kind_of(obj) == "lir" else obj


def fingerprint(obj: Any) -> str:
    import rlx

    return rlx.fingerprint(obj)


# ---------------------------------------------------------------------------- reading


def _unwrap(obj: Any) -> tuple[Any, str | None]:
    """A GraphModule becomes its graph (or LirModule) and its fusion policy."""
    import rlx

    if isinstance(obj, rlx.GraphModule):
        if obj.stage.value == "lir":
            return obj.lir, None
        return obj.graph, obj.fusion_policy.value
    kind_of(obj)
    return obj, None


def _is_text_form(path: str) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(256).lstrip()
    while head.startswith(b"#"):  # comment lines the text form allows
        head = head.split(b"\n", 1)[1].lstrip() if b"\n" in head else b""
    return head.startswith(b"graph")


def load_model(path: str, *, input_shapes: Mapping[str, Sequence[int | str]] | None = None,
               dims: Mapping[str, int] | None = None, proto: Any = None,
               values: Mapping[str, str | np.ndarray] | None = None) -> Model:
    """Read ``path``: an ``.rlx`` file, its text form, an ONNX model or a torch ``.pt2``
    program. Errors name the file. ``dims`` (``--dim``) and ``input_shapes`` (``--input-shape``,
    or the fed arrays' shapes) fix input dims: before the import for ONNX, right after it otherwise.
    ``proto``: the ONNX model already read from ``path``. ``values`` (``--value``) fixes ONNX
    inputs whose values shape the graph (a sample rate, a target shape) at import."""
    import rlx

    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    if os.path.isdir(path):
        raise CliError(f"{path}: is a directory, not a model file")
    lower = path.lower()
    dims, input_shapes = dict(dims or {}), dict(input_shapes or {})
    try:
        if lower.endswith(".onnx"):
            proto = read_onnx(path) if proto is None else proto
            shapes, used = onnx_import_shapes(proto, dims, input_shapes)
            static = onnx_values(proto, values) if values else None
            model = Model(*import_onnx(proto, path, shapes, static), path, source="onnx")
            model.binding.update({k: dims[k] for k in used})
            dims = {k: v for k, v in dims.items() if k not in used}
            input_shapes = {}
        elif values:
            raise CliError("--value: only ONNX models are specialised on input values at import")
        elif lower.endswith(".pt2"):
            model = Model(*_import_pt2(path), path, source="pt2")
        elif _is_text_form(path):
            with open(path, encoding="utf-8", errors="replace") as fh:
                model = Model(rlx.parse(fh.read()), {}, path, source="text")
        else:
            obj, params = rlx.load(path, with_params=True)
            obj, policy = _unwrap(obj)
            model = Model(obj, dict(params), path, policy=policy)
    except RlxError as exc:
        raise prefixed(exc, path) from None
    bind_dims(model, dims)
    if input_shapes:
        bind_dims(model, dims_from_shapes(model.graph, input_shapes), what="--input-shape")
    return model


def _import_pt2(path: str) -> tuple[Any, dict[str, np.ndarray]]:
    require("torch", "reading .pt2 programs")
    import rlx.torch

    ep = rlx.torch.load_program(path)  # checked first: nothing in the archive runs
    name = os.path.splitext(os.path.basename(path))[0] or "torch_module"
    g, params = rlx.torch.import_program(ep, name=name)
    return g, dict(params)


def import_upstream(path: str) -> Model:
    """An upstream rlx-ir JSON document (rlx.from_upstream_json); a HIR module becomes its HIR graph."""
    import rlx

    if not os.path.isfile(path):
        raise CliError(f"{path}: no such file")
    with open(path, "rb") as f:
        try:
            obj = rlx.from_upstream_json(f.read())
        except RlxError as exc:
            raise prefixed(exc, path) from None
    obj, policy = _unwrap(obj)
    return Model(obj, {}, path, policy=policy, source="json")


# ------------------------------------------------------------------------- symbolic dims


def symbols_of(g: Any) -> set[str]:
    return {d for n in g.nodes for d in n.type.shape.symbols}


def bind_dims(model: Model, binding: Mapping[str, int], what: str = "--dim") -> None:
    """Fix symbolic dims of ``model`` in place (an LirModule is planned again)."""
    if not binding:
        return
    from rlx.lir.specialize import bind_graph, specialize

    known = symbols_of(model.graph)
    for name in binding:
        if name not in known:
            raise CliError(f"{what} {name}: the model has no symbolic dim {name!r}; "
                           f"its symbolic dims are {sorted(known) or 'none (every shape is static)'}")
    model.obj = specialize(model.obj, binding) if model.kind == "lir" else bind_graph(model.obj, binding)
    model.binding.update(binding)


def dims_from_inputs(g: Any, feed: Mapping[str, np.ndarray]) -> dict[str, int]:
    """Sizes of the symbolic input dims, read from the arrays given for those inputs."""
    return dims_from_shapes(g, {n: a.shape for n, a in feed.items()}, "--input")


def dims_from_shapes(g: Any, shapes: Mapping[str, Sequence[int | str]], what: str = "--input-shape") -> dict[str, int]:
    """Sizes of the symbolic input dims of ``g`` read from whole input shapes."""
    declared = g.inputs()
    out: dict[str, int] = {}
    for name, given in shapes.items():
        value = declared.get(name)
        if value is None:
            raise CliError(f"{what} {name}: the model has no input {name!r}; its inputs are "
                           + (", ".join(f"{n} {list(v.shape)}" for n, v in declared.items()) or "none"))
        shape = tuple(value.shape)
        if len(given) != len(shape):
            raise CliError(f"{what} {name}: rank {len(given)} shape {list(given)}, the model expects {list(shape)}")
        for d, size in zip(shape, given):
            if isinstance(d, str) and isinstance(size, int):
                if out.setdefault(d, size) != size:
                    raise CliError(f"{what} {name}: dim {d!r} is {size} here but {out[d]} in another input")
            elif isinstance(size, int) and d != size:
                raise CliError(f"{what} {name}: shape {list(given)} does not match the model's {list(shape)}")
    return out


# ------------------------------------------------------------------------------ stages


def to_mir(model: Model, policy: str | None = None) -> Any:
    """The MIR graph of the model (a HIR graph is lowered under ``policy`` or its saved policy)."""
    from rlx.hir import lower_to_mir

    kind = model.kind
    if kind == "hir":
        return lower_to_mir(model.obj, policy or model.policy or "direct")
    return model.obj.graph if kind == "lir" else model.obj


def at_stage(model: Model, stage: str, policy: str | None = None, backend: str | None = None) -> Any:
    """The model brought to ``stage`` (hir / mir / opt / lir); a later stage cannot go back."""
    import rlx

    kind = model.kind
    if stage == kind or (stage == "opt" and kind == "lir"):
        return model.obj
    if stage == "hir" or (stage == "mir" and kind == "lir"):
        raise CliError(f"the file is at stage {kind.upper()}; it cannot be shown at the earlier stage {stage.upper()}")
    mir = to_mir(model, policy)
    if stage == "mir":
        return mir
    opt, _ = rlx.optimize(mir, backend=backend)
    return opt if stage == "opt" else rlx.plan(opt)


# ------------------------------------------------------------------------------ writing


def params_for(g: Any, params: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    declared = set(g.params())
    return {k: v for k, v in params.items() if k in declared}


def check_output_path(path: str, suffixes: Sequence[str] | None = None, what: str = "output") -> None:
    """``-o PATH`` names a file in an existing directory (with one of ``suffixes``)."""
    if os.path.isdir(path):
        example = os.path.join(path, "model" + (suffixes[0] if suffixes else ".rlx"))
        raise CliError(f"{path}: is a directory; -o needs a file name (e.g. {example})")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise CliError(f"{path}: directory {parent} does not exist")
    if suffixes and not path.lower().endswith(tuple(suffixes)):
        raise CliError(f"{path}: a {what} is written as " + " / ".join(suffixes))


def save_checked(obj: Any, path: str, params: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Write ``obj`` (and its declared weights) to ``path``, then read the file back and check
    that it loads, has the same fingerprint and the same weights, bit for bit."""
    import rlx

    check_output_path(path)
    keep = params_for(graph_of(obj), params)
    rlx.save(obj, path, params=keep or None)
    try:
        again, loaded = rlx.load(path, with_params=True)
    except RlxError as exc:
        raise CliError(f"{path}: written, but reading it back failed: {exc}") from exc
    if fingerprint(again) != fingerprint(obj):
        raise CliError(f"{path}: written, but the file read back differs from the model (fingerprint)")
    for name, want in keep.items():
        got = loaded.get(name)
        want = np.asarray(want)
        if got is None or got.shape != want.shape or got.dtype != want.dtype or got.tobytes() != want.tobytes():
            raise CliError(f"{path}: written, but weight {name!r} read back differs from the one saved")
    return keep


# ------------------------------------------------------------------------------ arguments


def parse_assignments(items: Sequence[str] | None, what: str, example: str = "FILE.npy") -> dict[str, str]:
    """``NAME=VALUE`` items (``--input``, ``--param``, ``--dim``) as a dict; usage errors raise."""
    out: dict[str, str] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise UsageError(f"{what} expects NAME={example}, got {item!r}")
        if name in out:
            raise UsageError(f"{what} {name!r} given twice")
        out[name] = value
    return out


def parse_dims(items: Sequence[str] | None) -> dict[str, int]:
    out = {}
    for name, value in parse_assignments(items, "--dim", "N").items():
        try:
            size = int(value)
        except ValueError:
            raise UsageError(f"--dim {name}: expected a size (an integer >= 0), got {value!r}") from None
        if size < 0:
            raise UsageError(f"--dim {name}: expected a size (an integer >= 0), got {size}")
        out[name] = size
    return out


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def command_parser(sub: Any, parent: Any, name: str, run: Any, help: str, description: str | None = None,
                   file_help: str | None = "a model file: .rlx, its text form, .onnx or .pt2") -> Any:
    """A subcommand parser calling ``run(args)``, with the model FILE argument unless ``file_help`` is None."""
    p = sub.add_parser(name, parents=[parent], help=help, description=description or help)
    p.set_defaults(func=run, parser=p)
    if file_help is not None:
        p.add_argument("file", help=file_help)
    return p


def dim_argument(p: Any, values: bool = True) -> None:
    """``--dim NAME=N`` and ``--input-shape NAME=d0,d1,...`` (and ``--value NAME=V``) on a subcommand parser."""
    if values:
        p.add_argument("--value", action="append", default=[], metavar="NAME=V",
                       help="ONNX: import with input NAME fixed to the value V (a number, numbers separated by commas, "
                            "or FILE.npy), for inputs whose values shape the graph")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                   help="fix the symbolic dim NAME to the size N before the import (repeat for each)")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=d0,d1,...",
                   help="fix the whole shape of input NAME (anonymous and -1 dims too; repeat for each)")


def parse_input_shapes(items: Sequence[str] | None) -> dict[str, list[int | str]]:
    """``--input-shape NAME=d0,d1,...`` items: sizes (>= 0) or dim names; ``NAME=`` with nothing is rank 0."""
    out: dict[str, list[int | str]] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--input-shape expects NAME=d0,d1,..., got {item!r}")
        if name in out:
            raise UsageError(f"--input-shape {name!r} given twice")
        dims: list[int | str] = []
        for tok in (t.strip() for t in value.replace("x", ",").split(",")) if value.strip() else ():
            if tok.lstrip("-").isdigit():
                if int(tok) < 0:
                    raise UsageError(f"--input-shape {name}: dims are sizes >= 0, got {tok}")
                dims.append(int(tok))
            elif tok.isidentifier():
                dims.append(tok)
            else:
                raise UsageError(f"--input-shape {name}: expected sizes separated by commas, got {value!r}")
        out[name] = dims
    return out


def open_model(args: Any, path: str | None = None, feed_shapes: Mapping[str, Sequence[int]] | None = None,
               proto: Any = None) -> Model:
    """The model of a command's FILE (or ``path``) with its ``--dim`` / ``--input-shape`` applied
    (and ``feed_shapes``: the shapes of the arrays a run is fed)."""
    shapes: dict[str, Sequence[int | str]] = dict(feed_shapes or {})
    shapes.update(parse_input_shapes(getattr(args, "input_shape", None)))
    values = parse_assignments(getattr(args, "value", None), "--value", "V")
    return load_model(path or args.file, dims=parse_dims(getattr(args, "dim", None)), input_shapes=shapes, proto=proto,
                      values=values)


def load_npy(path: str, what: str) -> np.ndarray:
    """An array from a ``.npy`` file; never unpickles."""
    if not os.path.exists(path):
        raise CliError(f"{what}: {path}: no such file")
    try:
        arr = np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise CliError(f"{what}: {path}: not a plain .npy array ({exc})") from None
    except OSError as exc:
        raise CliError(f"{what}: {path}: cannot read ({exc})") from None
    if not isinstance(arr, np.ndarray):
        if hasattr(arr, "close"):
            arr.close()
        raise CliError(f"{what}: {path}: expected one .npy array, got an .npz archive")
    return arr
