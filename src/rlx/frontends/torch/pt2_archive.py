"""Read a torch ``.pt2`` archive (``torch.export.save``) so that nothing in it can run.

``torch.export.load`` unpickles weights marked ``use_pickle``, constants and sample inputs with
``weights_only=False``, evaluates the program's symbolic shapes with ``sympy.sympify`` (Python
``eval``), resolves node targets by walking attributes of ``torch``, compiles ``guards_code``
and loads AOTInductor shared libraries. :func:`check_archive` reads the whole archive first and
refuses, with a :class:`FormatError` naming the member, anything outside what a plain exported
program needs:

- the zip itself: regular file, bounded size and member count, one root folder, plain ASCII
  member names (no ``..``, no absolute paths, no duplicates), stored (uncompressed) members whose
  declared sizes fit the file, CRCs checked;
- members: only the program JSON, weight / constant tensors and their JSON configs, sample
  inputs, extra text files and the format markers (no AOTInductor code, no TorchScript objects,
  no opaque pickled constants, no legacy formats);
- every pickle (``use_pickle`` payloads, sample inputs) is a ``torch.save`` zip whose ``data.pkl``
  is scanned opcode by opcode: only the globals that rebuild tensors are allowed;
- the program JSON: node targets are ``torch.ops.<namespace>.<op>[.<overload>]`` or pure
  ``operator`` / ``math`` / ``torch.sym_*`` functions; symbolic expressions contain only numbers,
  arithmetic, comparisons, ``Symbol('s0', …)`` and the sympy functions torch writes, at bounded cost
  (a power only with a literal exponent of at most 64 and no power inside it, integer literals within
  2**64, a bounded number of terms when expanded: a 7 KB power tower, or a Mod of a product of sums,
  would keep sympy busy forever); no guards code;
- declared tensor sizes fit the stored bytes and the :class:`~rlx.ir.serialize.LoadLimits`.

:func:`load_program` then hands the already-read bytes (never the path again) to
``torch.export.load`` with ``TORCH_FORCE_WEIGHTS_ONLY_LOAD`` set, so torch's own restricted
unpickler is a second line of defence.
"""

from __future__ import annotations

import ast
import io
import json
import math
import os
import pickletools
import re
import stat
import threading
import zipfile
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from rlx.ir.errors import FormatError
from rlx.ir.serialize import DEFAULT_LIMITS, LoadLimits

__all__ = ["check_archive", "load_program", "read_archive"]

_NAME = re.compile(r"[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*")
_PLAIN = re.compile(r"[A-Za-z0-9_.\-]+")

# Members of a torch.export archive, relative to its root folder.
_MARKERS = frozenset({"archive_format", "archive_version", "byteorder", ".data/version", ".data/serialization_id"})
_MEMBER = re.compile(r"models/[\w.\-]+\.json|data/(weights|constants|sample_inputs)/[\w.\-]+|extra/[\w.\-/]+")
# Members of a torch.save zip (a pickled payload), relative to its root folder.
_SAVE_MEMBER = re.compile(
    r"data\.pkl|data/\d+|version|byteorder|\.data/version|\.data/serialization_id|\.format_version|\.storage_alignment"
)

_DTYPE_NAMES = (
    "float32 float64 float16 bfloat16 complex32 complex64 complex128 int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool "
    "float8_e4m3fn float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz float8_e8m0fnu"
).split()
_STORAGES = (
    "Float Double Half BFloat16 Long Int Short Char Byte Bool ComplexFloat ComplexDouble"
).split()
# (module, name) pairs a tensor pickle may reference: the rebuild functions torch.save emits.
SAFE_GLOBALS = frozenset(
    {("torch", n) for n in _DTYPE_NAMES}
    | {("torch", f"{s}Storage") for s in _STORAGES}
    | {
        ("torch", "Size"),
        ("torch", "device"),
        ("torch", "Tensor"),
        ("torch.storage", "UntypedStorage"),
        ("torch.nn.parameter", "Parameter"),
        ("torch._utils", "_rebuild_tensor"),
        ("torch._utils", "_rebuild_tensor_v2"),
        ("torch._utils", "_rebuild_tensor_v3"),
        ("torch._utils", "_rebuild_parameter"),
        ("torch._utils", "_rebuild_parameter_with_state"),
        ("torch._utils", "_rebuild_sparse_tensor"),
        ("torch._tensor", "_rebuild_from_type_v2"),
        ("torch.serialization", "_get_layout"),
        ("collections", "OrderedDict"),
    }
    | {(module, n) for module in ("builtins", "__builtin__") for n in ("set", "frozenset", "slice", "complex")}
)
_REFUSED_OPS = frozenset({"EXT1", "EXT2", "EXT4"})
_STRING_OPS = frozenset({"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8"})
_PUT_OPS = frozenset({"PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"})
_GET_OPS = frozenset({"GET", "BINGET", "LONG_BINGET"})

# Node targets the program JSON may name (torch resolves them by getattr from torch / operator / math).
_TARGET = re.compile(
    r"torch\.ops\.(aten|prims|higher_order|quantized_decomposed)\.(_?[a-z][A-Za-z0-9_]*|__i?(and|or|xor|lshift|rshift)__)"
    r"(\.[A-Za-z][A-Za-z0-9_]*)?"
    r"|torch\._?sym_[a-z_]+|math\.[a-z][a-z0-9_]*"
)
_OPERATOR_FNS = frozenset(
    "getitem add sub mul truediv floordiv mod pow neg pos abs eq ne lt le gt ge and_ or_ xor not_ invert lshift rshift matmul truth".split()
)
# Names a symbolic-shape expression may use (sympy and torch.utils._sympy.functions).
_SYMPY_FNS = frozenset(
    (
        "Symbol Integer Float Rational Max Min Abs Eq Ne Lt Le Gt Ge And Or Not Mod Pow Mul Add sqrt floor ceiling "
        "Piecewise ITE oo zoo nan true false True False None int_oo IntInfinity NegativeIntInfinity "
        "FloorDiv ModularIndexing Where PythonMod CleanDiv CeilToInt FloorToInt CeilDiv LShift RShift PowByNatural "
        "FloatPow FloatTrueDiv IntTrueDiv IsNonOverlappingAndDenseIndicator TruncToFloat TruncToInt RoundToInt "
        "RoundDecimal ToFloat Identity"
    ).split()
)
_SYMBOL = re.compile(r"[a-z]+[0-9]+")
_TENSOR_METHODS = frozenset({"size", "stride", "storage_offset"})
_SYMBOL_FLAGS = frozenset("positive integer real nonnegative nonpositive negative finite infinite zero nonzero even odd".split())
_EXPR_NODES = (
    ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Call, ast.Name, ast.Constant, ast.keyword, ast.Load,
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.USub, ast.UAdd, ast.Not, ast.Invert,
    ast.BitAnd, ast.BitOr, ast.BitXor, ast.And, ast.Or, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
)
_MAX_EXPR = 1 << 14
# What evaluating an expression may cost: a power (``**``, Pow, PowByNatural, FloatPow, and the shifts,
# which are powers of two) needs a literal exponent of at most _MAX_EXPONENT in magnitude and no power
# inside it (no tower); an integer literal is at most _MAX_LITERAL in magnitude. sympy and Python then
# hold every number in a few hundred digits: 9**9**9**9 would not finish.
_POWERS = frozenset({"Pow", "PowByNatural", "FloatPow", "LShift", "RShift"})
_MAX_EXPONENT = 64
_MAX_LITERAL = 1 << 64
# sympy expands products and powers of sums inside Mod / PythonMod (a 7 KB Mod of 24 binomials never
# finishes): the terms a full expansion could have (sums add, products multiply, a power of n terms to e
# has C(e + n - 1, n - 1)) are bounded per expression and over the program.
_MAX_TERMS = 256
_MAX_PROGRAM_TERMS = 8192
_TERM_CAP = 1 << 40
# sympy compares every pair of a Max / Min's arguments under assumptions (1,200 arguments: minutes):
# at most _MAX_ARGS arguments to one n-ary sympy call, _MAX_PROGRAM_SELECTIONS Max / Min arguments in all.
_NARY = frozenset({"Max", "Min", "Piecewise", "And", "Or", "Add", "Mul"})
_MAX_ARGS = 8
_MAX_PROGRAM_SELECTIONS = 512

# Serialized ScalarType -> bytes per element (torch._export.serde.schema.ScalarType).
_ELEMENT_BYTES = {
    1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 2, 7: 4, 8: 8, 9: 4, 10: 8, 11: 16, 12: 1, 13: 2,
    28: 2, 29: 1, 30: 1, 31: 1, 32: 1, 33: 1, 34: 4, 35: 8,
}

_ENV_LOCK = threading.Lock()


def _bad(where: str, message: str) -> FormatError:
    return FormatError(f"{where}: {message}")


# ------------------------------------------------------------------------------------ the zip


def read_archive(path: str | os.PathLike[str], limits: LoadLimits | None = None) -> bytes:
    """The bytes of the regular file ``path`` (never a FIFO, device or directory), size-checked."""
    path = os.fspath(path)
    limits = limits or DEFAULT_LIMITS
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise FormatError(f"cannot read {path!r}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FormatError(f"{path}: not a regular file")
        if st.st_size > limits.max_total_bytes:
            raise FormatError(f"{path}: {st.st_size} bytes exceeds max_total_bytes={limits.max_total_bytes}")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(st.st_size)
    except OSError as exc:
        raise FormatError(f"cannot read {path!r}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) != st.st_size:
        raise FormatError(f"{path}: changed while being read")
    return data


def _open_zip(data: bytes, where: str, limits: LoadLimits) -> tuple[zipfile.ZipFile, str, dict[str, zipfile.ZipInfo]]:
    """The zip, its root folder and its members by name (relative to the root), all checked."""
    if not data.startswith(b"PK\x03\x04"):
        raise _bad(where, "not a zip archive (torch.export.save and torch.save write zip archives)")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
        raise _bad(where, f"not a readable zip archive ({exc})") from None
    if not infos:
        raise _bad(where, "empty zip archive")
    if len(infos) > limits.max_items:
        raise _bad(where, f"{len(infos)} members exceeds max_items={limits.max_items}")
    root = infos[0].filename.split("/", 1)[0]  # torch's reader takes the first member's folder
    members: dict[str, zipfile.ZipInfo] = {}
    total = 0
    for info in infos:
        name = info.filename
        if len(name) > limits.max_string or not _NAME.fullmatch(name) or any(p in (".", "..") for p in name.split("/")):
            raise _bad(where, f"member {name[:200]!r}: not a plain relative path")
        if not name.startswith(root + "/"):
            raise _bad(where, f"member {name!r} is outside the archive's root folder {root!r}")
        rel = name[len(root) + 1 :]
        if rel in members:
            raise _bad(where, f"member {name!r} appears twice")
        if info.flag_bits & 0x1:
            raise _bad(where, f"member {name!r} is encrypted")
        if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
            raise _bad(where, f"member {name!r} is compressed; torch archives store members uncompressed")
        if info.file_size > limits.max_tensor_bytes:
            raise _bad(where, f"member {name!r}: {info.file_size} bytes exceeds max_tensor_bytes={limits.max_tensor_bytes}")
        total += info.file_size
        members[rel] = info
    if total > len(data):
        raise _bad(where, f"members declare {total} bytes, more than the {len(data)}-byte archive holds (overlapping members)")
    return zf, root, members


def _read(zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> bytes:
    try:
        return zf.read(info)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, zlib.error) as exc:
        raise _bad(where, f"member {info.filename!r} cannot be read ({exc})") from None


# ------------------------------------------------------------------------------------ pickles


def _pickle_globals(data: bytes, where: str) -> Iterator[tuple[str, str, str]]:
    """``(opcode, module, name)`` for every global a pickle references; unresolvable ones refused."""
    memo: dict[int, str | None] = {}
    top: str | None = None  # the value on top of the stack, when it is a known string
    recent: list[str | None] = []  # known strings pushed by the last value-pushing opcodes
    try:
        for op, arg, pos in pickletools.genops(data):
            name = op.name
            if name in _REFUSED_OPS:
                raise _bad(where, f"pickle opcode {name} at byte {pos} (copyreg extension registry) refused")
            if name == "FRAME":
                continue
            if name in _PUT_OPS:
                memo[len(memo) if name == "MEMOIZE" else arg] = top
                continue
            if name in _STRING_OPS:
                top = arg if isinstance(arg, str) else arg.decode("latin-1")
            elif name in _GET_OPS:
                top = memo.get(arg)
            else:
                top = None
            if name in ("GLOBAL", "INST"):
                module, _, attr = arg.partition(" ")
                yield name, module, attr
            elif name == "STACK_GLOBAL":
                if len(recent) < 2 or recent[-1] is None or recent[-2] is None:
                    raise _bad(where, f"pickle STACK_GLOBAL at byte {pos} with names computed at load time refused")
                yield name, recent[-2], recent[-1]
            recent = [*recent, top][-2:]
            if name == "STOP":
                break
    except FormatError:
        raise
    except Exception as exc:  # pickletools' own errors on truncated / malformed opcodes
        raise _bad(where, f"malformed pickle ({type(exc).__name__}: {exc})") from None


def check_pickle(data: bytes, where: str) -> None:
    """Refuse a pickle that references any global outside :data:`SAFE_GLOBALS`."""
    for op, module, attr in _pickle_globals(data, where):
        if (module, attr) not in SAFE_GLOBALS:
            raise _bad(where, f"pickle references the forbidden global {module}.{attr} ({op}); only tensor-rebuild globals are allowed")


def check_torch_save(data: bytes, where: str, limits: LoadLimits) -> None:
    """A ``torch.save`` payload: a zip of ``data.pkl`` (scanned) and raw storages, nothing else."""
    if not data:
        return
    zf, _, members = _open_zip(data, where, limits)
    for rel, info in members.items():
        if not _SAVE_MEMBER.fullmatch(rel):
            raise _bad(where, f"member {info.filename!r} is not part of a torch.save tensor file (TorchScript or unknown content refused)")
    if "data.pkl" not in members:
        raise _bad(where, "torch.save payload without data.pkl")
    for info in members.values():
        raw = _read(zf, info, where)
        if info.filename.endswith(".pkl"):
            check_pickle(raw, f"{where}:{info.filename}")


# ------------------------------------------------------------------------------------ program JSON


def _json(raw: bytes, where: str, limits: LoadLimits) -> Any:
    if len(raw) > limits.max_document_bytes:
        raise _bad(where, f"{len(raw)} bytes exceeds max_document_bytes={limits.max_document_bytes}")
    try:
        return json.loads(raw)
    except RecursionError:
        raise _bad(where, "JSON nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise _bad(where, f"invalid JSON ({exc})") from None


def check_target(target: Any, where: str) -> None:
    """A node target torch will resolve: an ATen-style op or a pure arithmetic function."""
    if not isinstance(target, str):
        raise _bad(where, f"node target {target!r} is not a string")
    if target.startswith("_operator."):
        if target[len("_operator.") :] in _OPERATOR_FNS:
            return
    elif _TARGET.fullmatch(target):
        return
    raise _bad(where, f"node target {target[:200]!r} refused (only torch.ops.aten/prims/higher_order ops and arithmetic are allowed)")


def _symbol_call(node: ast.Call) -> bool:
    """``Symbol('s0', positive=True, …)``: a plain symbol name and boolean assumption flags."""
    name = node.args[0] if len(node.args) == 1 else None
    flags = all(k.arg in _SYMBOL_FLAGS and isinstance(k.value, ast.Constant) and isinstance(k.value.value, bool) for k in node.keywords)
    return isinstance(name, ast.Constant) and isinstance(name.value, str) and bool(_SYMBOL.fullmatch(name.value)) and flags


def _expr_rule(node: ast.AST, strings: set[int]) -> str | None:
    """Why ``node`` may not appear in a sympy expression (None: it may); ``strings`` collects the
    ids of the string constants allowed (Symbol's name)."""
    if isinstance(node, ast.Name) and not (node.id in _SYMPY_FNS or _SYMBOL.fullmatch(node.id)):
        return f"name {node.id!r}"
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _SYMPY_FNS:
            return "a call of anything but a sympy function"
        if node.func.id == "Symbol":
            if not _symbol_call(node):
                return "Symbol without a plain name and boolean flags"
            strings.add(id(node.args[0]))
        elif node.keywords:
            return "keyword arguments"
    return None


def _guard_rule(node: ast.AST, strings: set[int]) -> str | None:
    """Why ``node`` may not appear in a guard (``L['x'].size()[0] <= 2*L['y'].size()[1]`` …)."""
    if isinstance(node, ast.Subscript):
        if isinstance(node.slice, ast.Constant) and type(node.slice.value) in (str, int):
            strings.add(id(node.slice))
            return None
        return "a computed subscript"
    if isinstance(node, ast.Name) and node.id not in _SYMPY_FNS and node.id != "L":
        return f"name {node.id!r}"
    if isinstance(node, ast.Attribute):
        return None if node.attr in _TENSOR_METHODS else f"attribute {node.attr!r}"
    if isinstance(node, ast.Call):
        if node.keywords or not (isinstance(node.func, ast.Attribute) or (isinstance(node.func, ast.Name) and node.func.id in _SYMPY_FNS)):
            return "a call of anything but a size accessor or sympy function"
        if isinstance(node.func, ast.Attribute) and node.args:
            return "arguments to a size accessor"
    return None


def _power_operands(node: ast.AST) -> tuple[ast.AST, ast.AST] | None:
    """(base, exponent) of a power node, None for anything else."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return node.left, node.right
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _POWERS and len(node.args) == 2:
        return node.args[0], node.args[1]
    return None


def _literal(node: ast.AST) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    return None


def _cost_rule(node: ast.AST) -> str | None:
    """Why evaluating ``node`` could cost without bound (None: it cannot); see _MAX_EXPONENT."""
    if isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) > _MAX_LITERAL:
        return "an integer literal beyond 2**64"
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") in _NARY and len(node.args) > _MAX_ARGS:
        return f"{node.func.id} of more than {_MAX_ARGS} arguments"  # type: ignore[attr-defined]
    operands = _power_operands(node)
    if operands is None:
        return None
    exponent = _literal(operands[1])
    if exponent is None or not abs(exponent) <= _MAX_EXPONENT:
        return f"a power whose exponent is not a literal of at most {_MAX_EXPONENT}"
    if any(_power_operands(n) is not None for n in ast.walk(operands[0])):
        return "a power of a power"
    return None


def _expanded_terms(tree: ast.AST) -> int:
    """How many terms expanding ``tree`` could give (an upper bound; iterative: the tree may be deep)."""
    counts: dict[int, int] = {}
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, done = stack.pop()
        kids = list(ast.iter_child_nodes(node))
        if not done:
            stack.append((node, True))
            stack.extend((k, False) for k in kids)
            continue
        parts = [counts.get(id(k), 1) for k in kids if not isinstance(k, (ast.operator, ast.unaryop, ast.cmpop, ast.boolop,
                                                                           ast.expr_context))]
        power = _power_operands(node)
        if power is not None and not (isinstance(node, ast.Call) and node.func.id in ("LShift", "RShift")):  # type: ignore[attr-defined]
            n, e = counts.get(id(power[0]), 1), _literal(power[1])
            total = math.comb(int(e) + n - 1, n - 1) if isinstance(e, int) and 0 <= e <= _MAX_EXPONENT and n < _TERM_CAP else n
        elif (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)) or (isinstance(node, ast.Call) and
                                                                                 getattr(node.func, "id", "") == "Mul"):
            total = math.prod(parts)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Symbol":
            total = 1
        else:
            total = sum(parts) if parts else 1
        counts[id(node)] = min(total, _TERM_CAP)
    return counts[id(tree)]


def _check_ast(text: Any, where: str, what: str, rule: Callable[[ast.AST, set[int]], str | None],
               extra: tuple[type, ...] = ()) -> tuple[int, int]:
    """Refuse ``text`` unless every node of its Python parse is arithmetic / comparison or passes ``rule``;
    returns how many terms expanding it could give (:func:`_expanded_terms`) and its Max / Min arguments."""
    if not isinstance(text, str) or len(text) > _MAX_EXPR:
        raise _bad(where, f"{what} is not a short string")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise _bad(where, f"{what} {text[:200]!r} does not parse") from None
    strings: set[int] = set()
    for node in ast.walk(tree):  # breadth first: a call or subscript is seen before its parts
        why = None if isinstance(node, _EXPR_NODES + extra) else type(node).__name__
        why = why or rule(node, strings) or _cost_rule(node)
        if why is None and isinstance(node, ast.Constant) and not (type(node.value) in (bool, int, float) or id(node) in strings):
            why = f"constant {node.value!r}"
        if why:
            raise _bad(where, f"{what} {text[:200]!r}: {why} refused")
    selections = sum(len(n.args) for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") in ("Max", "Min"))
    return _expanded_terms(tree), selections


def check_expr(text: Any, where: str, budget: list[int] | None = None) -> None:
    """A symbolic-shape expression (torch parses it with ``sympy.sympify``, i.e. ``eval``); ``budget``
    (the terms and the Max / Min arguments left for the program) is charged its share."""
    terms, selections = _check_ast(text, where, "symbolic expression", _expr_rule)
    if terms > _MAX_TERMS:
        raise _bad(where, f"symbolic expression {text[:200]!r}: expanding it could give {terms} terms, more than {_MAX_TERMS}: refused")
    if budget is not None:
        budget[0] -= terms
        budget[1] -= selections
        if budget[0] < 0:
            raise _bad(where, f"symbolic expressions: together they could expand to more than {_MAX_PROGRAM_TERMS} terms: refused")
        if budget[1] < 0:
            raise _bad(where, f"symbolic expressions: more than {_MAX_PROGRAM_SELECTIONS} Max / Min arguments in all: refused")


def check_guard(text: Any, where: str) -> None:
    """One line of ``guards_code`` (torch compiles it into the module's input check)."""
    _check_ast(text, where, "guard", _guard_rule, (ast.Subscript, ast.Attribute))


def _walk(doc: Any, where: str, budget: list[int], depth: int = 0) -> None:
    if depth > 1000:
        raise _bad(where, "program JSON nested too deeply")
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key == "target" and "inputs" in doc:
                check_target(value, where)
            elif key == "expr_str":
                check_expr(value, where, budget)
            elif key == "guards_code":
                for line in value if isinstance(value, list) else [value]:
                    check_guard(line, f"{where}: guards_code")
            _walk(value, where, budget, depth + 1)
    elif isinstance(doc, list):
        for item in doc:
            _walk(item, where, budget, depth + 1)


def _check_program(doc: Any, where: str) -> None:
    if not isinstance(doc, dict) or "graph_module" not in doc:
        raise _bad(where, "not a serialized exported program (no graph_module)")
    budget = [_MAX_PROGRAM_TERMS, _MAX_PROGRAM_SELECTIONS]
    for key in doc.get("range_constraints") or {}:
        if not (isinstance(key, str) and _SYMBOL.fullmatch(key)):
            check_expr(key, f"{where}: range_constraints", budget)
    _walk(doc, where, budget)


def _as_int(v: Any, where: str) -> int:
    if not (isinstance(v, dict) and set(v) == {"as_int"} and type(v["as_int"]) is int):
        raise _bad(where, f"expected a concrete int, got {str(v)[:100]}")
    return v["as_int"]


def _check_payload_config(raw: bytes, folder: str, members: dict[str, zipfile.ZipInfo], where: str, limits: LoadLimits) -> dict[str, bool]:
    """Check a weights / constants config; return ``{member: use_pickle}`` of the payloads it names."""
    doc = _json(raw, where, limits)
    config = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(config, dict):
        raise _bad(where, "payload config without a config mapping")
    used: dict[str, bool] = {}
    for fqn, entry in config.items():
        at = f"{where}: {str(fqn)[:100]}"
        if not isinstance(entry, dict):
            raise _bad(at, "entry is not an object")
        name = entry.get("path_name")
        if not isinstance(name, str) or not _PLAIN.fullmatch(name) or name in (".", ".."):
            raise _bad(at, f"path_name {str(name)[:100]!r} is not a plain member name")
        if folder == "data/constants/" and not name.startswith("tensor_"):
            raise _bad(at, f"constant {name!r} is not a tensor (TorchScript / opaque Python objects run code on load; refused)")
        member = folder + name
        if member not in members:
            raise _bad(at, f"names the missing member {member!r}")
        pickled = entry.get("use_pickle")
        if type(pickled) is not bool:
            raise _bad(at, "use_pickle is not a bool")
        used[member] = pickled or used.get(member, False)
        if not pickled:
            _check_tensor_meta(entry.get("tensor_meta"), members[member].file_size, at, limits)
    return used


def _check_tensor_meta(meta: Any, stored: int, where: str, limits: LoadLimits) -> None:
    """Declared sizes / strides / offset must fit the stored bytes (torch allocates zeros otherwise)."""
    if not isinstance(meta, dict):
        raise _bad(where, "tensor_meta missing")
    width = _ELEMENT_BYTES.get(meta.get("dtype"))  # type: ignore[arg-type]
    if width is None:
        raise _bad(where, f"unsupported dtype code {meta.get('dtype')!r}")
    sizes, strides = meta.get("sizes"), meta.get("strides")
    if not isinstance(sizes, list) or not isinstance(strides, list) or len(sizes) != len(strides) or len(sizes) > limits.max_rank:
        raise _bad(where, "sizes / strides malformed")
    dims = [_as_int(s, where) for s in sizes]
    steps = [_as_int(s, where) for s in strides]
    offset = _as_int(meta.get("storage_offset"), where)
    if any(d < 0 or d > limits.max_dim for d in dims) or any(s < 0 for s in steps) or offset < 0:
        raise _bad(where, f"sizes {dims} / strides {steps} / offset {offset} out of range")
    numel = 1
    for d in dims:
        numel *= d
    if numel * width > limits.max_tensor_bytes:
        raise _bad(where, f"declared {numel * width} bytes exceeds max_tensor_bytes={limits.max_tensor_bytes}")
    if numel:
        need = (offset + sum((d - 1) * s for d, s in zip(dims, steps)) + 1) * width
        if need > stored:
            raise _bad(where, f"declares sizes {dims} needing {need} bytes; the stored tensor has {stored}")


def check_archive(data: bytes, where: str = "<pt2>", limits: LoadLimits | None = None) -> None:
    """Refuse ``data`` unless it is a plain ``torch.export.save`` archive (see the module doc)."""
    limits = limits or DEFAULT_LIMITS
    zf, root, members = _open_zip(data, where, limits)
    for rel, info in members.items():
        if rel not in _MARKERS and not _MEMBER.fullmatch(rel):
            raise _bad(where, f"member {info.filename!r} is not part of an exported program (AOTInductor code, TorchScript, unknown)")
    fmt = members.get("archive_format")
    if fmt is None or _read(zf, fmt, where).strip() != b"pt2":
        raise _bad(where, "archive_format is not 'pt2' (not written by torch.export.save)")
    models = [rel[len("models/") : -len(".json")] for rel in members if rel.startswith("models/")]
    if not models:
        raise _bad(where, "no models/*.json program in the archive")
    pickled: dict[str, bool] = {}
    for model in models:
        at = f"{where}:{root}/models/{model}.json"
        _check_program(_json(_read(zf, members[f"models/{model}.json"], where), at, limits), at)
        for folder, suffix in (("data/weights/", "weights"), ("data/constants/", "constants")):
            config = f"{folder}{model}_{suffix}_config.json"
            if config in members:
                found = _check_payload_config(_read(zf, members[config], where), folder, members, f"{where}:{root}/{config}", limits)
                for member, p in found.items():
                    pickled[member] = pickled.get(member, False) or p
        sample = f"data/sample_inputs/{model}.pt"
        if sample in members:
            pickled[sample] = True
    for rel, info in members.items():
        raw = _read(zf, info, where)  # every member: CRC and local header checked
        if pickled.get(rel) or raw.startswith(b"\x80") or rel.endswith((".pt", ".pkl")):
            check_torch_save(raw, f"{where}:{info.filename}", limits)


# ------------------------------------------------------------------------------------ loading


def load_program(path: str | os.PathLike[str], limits: LoadLimits | None = None) -> Any:
    """The ``torch.export.ExportedProgram`` in ``path``, after :func:`check_archive` accepted it."""
    where = os.fspath(path)
    data = read_archive(where, limits)
    check_archive(data, where, limits)
    import logging

    import torch

    quiet = logging.getLogger("torch.export")
    with _ENV_LOCK:
        saved = {k: os.environ.pop(k, None) for k in ("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")}
        os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)  # torch logs its own traceback before raising
        try:
            return torch.export.load(io.BytesIO(data))
        except Exception as exc:  # torch's own errors on an archive that passed the checks
            raise _bad(where, f"torch could not read the exported program ({type(exc).__name__}: {str(exc)[:300]})") from None
        finally:
            quiet.setLevel(level)
            for k, v in saved.items():
                os.environ.pop(k, None)
                if v is not None:
                    os.environ[k] = v
