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

from rlx.ir.errors import RlxError

STAGES = ("hir", "mir", "opt", "lir")
#: the ``--policy`` option of the commands that lower a HIR file
POLICY_ARG = {"choices": ("direct", "fusable"), "default": None,
              "help": "fusion policy used to lower a HIR file (default: the module's own, else direct)"}


class CliError(RlxError):
    """A user mistake the command line reports in one line."""


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


def load_model(path: str, *, input_shapes: Mapping[str, Sequence[int]] | None = None) -> Model:
    """Read ``path``: an ``.rlx`` file, its text form, an ONNX model or a torch ``.pt2``
    program. Errors name the file. ``input_shapes`` fixes ONNX input shapes on import."""
    import rlx

    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    if os.path.isdir(path):
        raise CliError(f"{path}: is a directory, not a model file")
    lower = path.lower()
    try:
        if lower.endswith(".onnx"):
            return Model(*_import_onnx(path, input_shapes), path, source="onnx")
        if lower.endswith(".pt2"):
            return Model(*_import_pt2(path), path, source="pt2")
        if _is_text_form(path):
            with open(path, encoding="utf-8", errors="replace") as fh:
                return Model(rlx.parse(fh.read()), {}, path, source="text")
        obj, params = rlx.load(path, with_params=True)
    except RlxError as exc:
        text = str(exc)
        raise type(exc)(text if text.startswith(path) else f"{path}: {text}") from exc
    obj, policy = _unwrap(obj)
    return Model(obj, dict(params), path, policy=policy)


def _import_onnx(path: str, input_shapes: Mapping[str, Sequence[int]] | None) -> tuple[Any, dict[str, np.ndarray]]:
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise CliError("reading ONNX needs the onnx package: pip install 'rlx[onnx]'") from None
    import rlx.onnx

    try:
        g, params = rlx.onnx.import_model(path, input_shapes=dict(input_shapes) if input_shapes else None)
    except RlxError as exc:
        if "input_shapes=" in str(exc):
            raise CliError(f"{str(exc).replace('(pass input_shapes=)', '')}; on the command line fix it with "
                           "--dim NAME=N or give the input as --input NAME=FILE.npy (its shape is used)") from exc
        raise
    except Exception as exc:  # the onnx library's own parse errors
        raise CliError(f"not a readable ONNX model ({type(exc).__name__}: {exc})") from exc
    return g, dict(params)


def _import_pt2(path: str) -> tuple[Any, dict[str, np.ndarray]]:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise CliError("reading .pt2 programs needs torch: pip install 'rlx[torch]'")
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
            raise type(exc)(f"{path}: {exc}") from exc
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
    out: dict[str, int] = {}
    for name, value in g.inputs().items():
        arr = feed.get(name)
        if arr is None:
            continue
        shape = tuple(value.shape)
        if arr.ndim != len(shape):
            raise CliError(f"--input {name}: rank {arr.ndim} array {list(arr.shape)}, the model expects {list(shape)}")
        for d, size in zip(shape, arr.shape):
            if isinstance(d, str):
                if out.setdefault(d, int(size)) != size:
                    raise CliError(f"--input {name}: dim {d!r} is {size} here but {out[d]} in another input")
            elif d != size:
                raise CliError(f"--input {name}: shape {list(arr.shape)} does not match the model's {list(shape)}")
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


class UsageError(Exception):
    """A malformed command line (exit status 2, like argparse's own errors)."""


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


def dim_argument(p: Any) -> None:
    """``--dim NAME=N`` on a subcommand parser."""
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                   help="fix the symbolic dim NAME to the size N (repeat for each)")


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
