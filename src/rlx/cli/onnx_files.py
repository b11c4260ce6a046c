"""What the commands do with an ONNX file before and at its import: read it once (checked reader),
list its fed inputs, turn ``--dim`` / ``--input-shape`` into the importer's ``input_shapes`` and
``--value`` into its ``static_inputs``, and name what to do when a model's shapes follow its values."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlx.cli.errors import CliError, UsageError, require
from rlx.ir.errors import RlxError


def read_onnx(path: str) -> Any:
    """The ``onnx.ModelProto`` of ``path`` with its external data read in (checked reader)."""
    require("onnx", "reading ONNX")
    from rlx.frontends.onnx import loading
    from rlx.ir.serialize import DEFAULT_LIMITS

    try:
        return loading.read_model(path, None, DEFAULT_LIMITS)
    except RlxError:
        raise
    except Exception as exc:  # the onnx library's own parse errors
        raise CliError(f"not a readable ONNX model ({type(exc).__name__}: {exc})") from exc


def onnx_inputs(proto: Any) -> dict[str, list[int | str | None]]:
    """The fed inputs of an ONNX model (not initializers): dims as sizes, ``dim_param`` names or
    ``None`` (anonymous, ``0`` or ``-1``: unknown, as the importer reads them); a tensor without a declared shape has ``[]`` here."""
    inits = {t.name for t in proto.graph.initializer}
    out: dict[str, list[int | str | None]] = {}
    for vi in proto.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        dims: list[int | str | None] = []
        if tt is not None and tt.HasField("shape"):
            for d in tt.shape.dim:
                dims.append(int(d.dim_value) if d.dim_value > 0 else (d.dim_param or None))  # 0 / -1: unknown
        out[vi.name] = dims
    return out


def shape_text(dims: Sequence[int | str | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def inputs_text(declared: Mapping[str, Sequence[int | str | None]]) -> str:
    return ", ".join(f"{n} {shape_text(d)}" for n, d in declared.items()) or "none"


def onnx_import_shapes(proto: Any, dims: Mapping[str, int],
                       input_shapes: Mapping[str, Sequence[int | str]]) -> tuple[dict[str, list[int | str]], set[str]]:
    """``input_shapes=`` for the ONNX importer: ``--input-shape`` whole shapes, and ``--dim``
    sizes put in place of the named dims they fix (other dims stay symbolic); also the ``--dim``
    names so used."""
    from rlx.ir.symbolic import fresh_symbol

    declared = onnx_inputs(proto)
    for name, shape in input_shapes.items():
        if name not in declared:
            raise CliError(f"--input-shape {name}: the model has no input {name!r}; its inputs are {inputs_text(declared)}")
        want = declared[name]
        if want and len(want) != len(shape):
            raise CliError(f"--input-shape {name}: rank {len(shape)} shape {list(shape)}, the model declares "
                           f"{shape_text(want)}")
        for i, (d, size) in enumerate(zip(want, shape)):
            if isinstance(d, int) and isinstance(size, int) and d != size:
                raise CliError(f"--input-shape {name}: dim {i} is {size}, the model declares {shape_text(want)}")
    from rlx.frontends.onnx.import_context import _dim_name

    # each dim's rlx symbol: the dim_param made an identifier, or the importer's fresh name for an anonymous one
    taken = {_dim_name(d, i) for shape in declared.values() for i, d in enumerate(shape) if isinstance(d, str)}
    symbols: dict[str, list[str | None]] = {}
    for name, shape in declared.items():
        row: list[str | None] = []
        for i, d in enumerate(shape):
            if d is None:
                sym = str(fresh_symbol(name, i, taken))
                taken.add(sym)
                row.append(sym)
            else:
                row.append(_dim_name(d, i) if isinstance(d, str) else None)
        symbols[name] = row
    known = {d for shape in declared.values() for d in shape if isinstance(d, str)} | {
        s for row in symbols.values() for s in row if s}
    unknown = sorted(set(dims) - known)
    if unknown:
        raise CliError(f"--dim {unknown[0]}: the model has no dim {unknown[0]!r}; its inputs are {inputs_text(declared)}"
                       + (f" (symbols {', '.join(sorted(s for row in symbols.values() for s in row if s))})"
                          if any(d is None for shape in declared.values() for d in shape) else ""))
    used: set[str] = set()
    out: dict[str, list[int | str]] = {n: list(s) for n, s in input_shapes.items()}
    for name, shape in declared.items():
        if name in out:
            continue
        fixed: list[int | str] = []
        for d, sym in zip(shape, symbols[name]):
            key = next((k for k in (d, sym) if isinstance(k, str) and k in dims), None)
            if key is not None:
                used.add(key)
                fixed.append(dims[key])
            else:
                fixed.append(d if isinstance(d, int) else str(sym))
        if fixed != [d if isinstance(d, int) else str(sym) for d, sym in zip(shape, symbols[name])]:
            out[name] = fixed
    return out, used


def import_onnx(proto: Any, path: str, input_shapes: Mapping[str, Sequence[int | str]] | None,
                 static: Mapping[str, np.ndarray] | None = None) -> tuple[Any, dict[str, np.ndarray]]:
    import rlx.onnx
    from rlx.frontends.onnx.import_context import NeedsShapes, NeedsStatic

    try:
        g, params = rlx.onnx.import_model(proto, input_shapes=dict(input_shapes) if input_shapes else None,
                                          static_inputs=static, base_dir=os.path.dirname(os.path.abspath(path)))
    except NeedsStatic as exc:
        exc.args = (f"{exc}: the graph's shapes depend on input values; fix them with --value NAME=V "
                    f"(a number, numbers separated by commas or FILE.npy), or `rlx run {path} --input NAME=X.npy ...` "
                    "runs it as shipped (specialised on the values fed)",)
        raise
    except NeedsShapes as exc:
        exc.args = (f"{exc}; fix the input shapes with --dim NAME=N or --input-shape NAME=d0,d1,... "
                    f"(or `rlx run {path}`, which specialises on the inputs fed)",)
        raise
    except RlxError as exc:
        if "input_shapes=" in str(exc):
            exc.args = (f"{str(exc).replace('(pass input_shapes=)', '')}; on the command line fix it with "
                        "--dim NAME=N, --input-shape NAME=d0,d1,... or give the input as --input NAME=FILE.npy "
                        "(its shape is used)",)
        raise
    return g, dict(params)


def onnx_values(proto: Any, values: Mapping[str, str | np.ndarray]) -> dict[str, np.ndarray]:
    """``--value NAME=V`` for an ONNX model: V is ``FILE.npy`` or numbers (``16000``, ``1,3,224``),
    cast to the input's declared element type."""
    from onnx.helper import tensor_dtype_to_np_dtype

    declared = onnx_inputs(proto)
    types = {vi.name: vi.type.tensor_type.elem_type for vi in proto.graph.input if vi.type.HasField("tensor_type")}
    out: dict[str, np.ndarray] = {}
    for name, text in values.items():
        if name not in declared:
            raise CliError(f"--value {name}: the model has no input {name!r}; its inputs are {inputs_text(declared)}")
        if isinstance(text, np.ndarray):  # a value fed to `rlx run`
            arr = text
        elif text.lower().endswith(".npy"):
            from rlx.cli.common import load_npy

            arr = load_npy(text, f"--value {name}")
        else:
            try:
                nums = [float(t) for t in text.split(",")]
            except ValueError:
                raise UsageError(f"--value {name}: expected FILE.npy or numbers separated by commas, got {text!r}") from None
            arr = np.asarray(nums[0] if len(nums) == 1 else nums)
        want = tensor_dtype_to_np_dtype(types[name]) if types.get(name) else arr.dtype
        out[name] = np.asarray(arr).astype(want)
    return out
