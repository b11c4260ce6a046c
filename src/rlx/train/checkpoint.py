"""Training checkpoints: one safetensors file holding the params, the optimizer state
(``state/<param>/<slot>``), float32 master copies (``master/<param>``), and in its JSON
metadata the step counts, loss history, optimizer, schedule and loss-scale settings, the
trainer's options and the training graph (rlx JSON).

Saving writes a temporary file next to the target, fsyncs it and renames it over the target,
so a crash or a kill during ``save`` leaves the previous checkpoint whole. Loading never
executes code: the file is parsed here with every size, offset, dtype and name checked
against the file before any array is made; a bad file raises :class:`TrainingError`
(an :class:`rlx.RlxError`) naming the field.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import struct
from collections.abc import Mapping
from typing import Any, BinaryIO

import numpy as np

from rlx.ir import fileio
from rlx.ir.errors import RlxError
from rlx.train.errors import TrainingError
from rlx.train.schedules import WarmupCosine

__all__ = ["FORMAT", "MAX_BYTES", "load", "read_tensors", "save", "write_tensors"]

FORMAT = "rlx.training/1"
MAX_BYTES = 16 << 30  # refuse bigger files before reading
MAX_HEADER = 64 << 20
MAX_RANK = 32
_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
           "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
_CODES = {np.dtype(v): k for k, v in _DTYPES.items()}


# ----------------------------------------------------------------------------- the file format
def write_tensors(f: BinaryIO, tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str]) -> None:
    """A safetensors file: u64 header length, the JSON header, the little-endian tensor bytes."""
    header: dict[str, Any] = {"__metadata__": dict(metadata)}
    blobs, offset = [], 0
    for name, arr in tensors.items():
        arr = np.asarray(arr, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
        code = _CODES.get(arr.dtype)
        if code is None:
            raise TrainingError(f"checkpoint: tensor {name!r} has dtype {arr.dtype}, which checkpoints do not hold")
        data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": code, "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    f.write(struct.pack("<Q", len(raw)))
    f.write(raw)
    for data in blobs:
        f.write(data)


def read_tensors(path: str, max_bytes: int = MAX_BYTES) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """``(tensors, metadata)`` of a safetensors file, every field checked against the file."""
    try:
        blob = fileio.read_regular(os.fspath(path), max_bytes, "checkpoint", "max_bytes")
    except RlxError as exc:
        raise TrainingError(str(exc)) from None
    where = f"checkpoint {os.fspath(path)!r}"
    if len(blob) < 8:
        raise TrainingError(f"{where}: {len(blob)} bytes, too short for a safetensors header")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > min(MAX_HEADER, len(blob) - 8):
        raise TrainingError(f"{where}: header length {n} exceeds the file ({len(blob)} bytes) or {MAX_HEADER}")
    try:
        header = json.loads(blob[8: 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise TrainingError(f"{where}: the header is not JSON ({type(exc).__name__})") from None
    if not isinstance(header, dict):
        raise TrainingError(f"{where}: the header is a {type(header).__name__}, not an object")
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise TrainingError(f"{where}: __metadata__ must map strings to strings")
    data = memoryview(blob)[8 + n:]
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        at = f"{where}: tensor {name!r}"
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise TrainingError(f"{at}: needs exactly dtype, shape and data_offsets")
        dtype = _DTYPES.get(info["dtype"]) if isinstance(info["dtype"], str) else None
        if dtype is None:
            raise TrainingError(f"{at}: dtype {info['dtype']!r} is not one of {sorted(_DTYPES)}")
        shape, offs = info["shape"], info["data_offsets"]
        if not isinstance(shape, list) or len(shape) > MAX_RANK or not all(type(d) is int and d >= 0 for d in shape):
            raise TrainingError(f"{at}: shape {shape!r} is not a list of at most {MAX_RANK} sizes >= 0")
        if not (isinstance(offs, list) and len(offs) == 2 and all(type(o) is int for o in offs) and 0 <= offs[0] <= offs[1] <= len(data)):
            raise TrainingError(f"{at}: data_offsets {offs!r} are not within the {len(data)} data bytes")
        itemsize = np.dtype(dtype).itemsize
        if math.prod(shape) * itemsize != offs[1] - offs[0]:
            raise TrainingError(f"{at}: shape {shape} of {info['dtype']} needs {math.prod(shape) * itemsize} bytes, "
                                f"data_offsets span {offs[1] - offs[0]}")
        arr = np.frombuffer(data[offs[0]: offs[1]], dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)
        tensors[name] = arr.astype(dtype, copy=True)
    return tensors, metadata


# ----------------------------------------------------------------------------- trainer <-> file
def _schedule_json(schedule: Any) -> Any:
    if schedule is None:
        return None
    if isinstance(schedule, WarmupCosine):
        return {"warmup_cosine": dataclasses.asdict(schedule)}
    return {"callable": repr(schedule)[:200]}


def save(trainer: Any, path: Any) -> None:
    """Write ``trainer`` to ``path`` atomically (temp file, fsync, rename)."""
    from rlx.ir.serialize import to_json
    from rlx.train.optim import SGD, Adam

    opt = trainer.optimizer
    if not isinstance(opt, (SGD, Adam)):
        raise TrainingError(f"Trainer.save: optimizer {type(opt).__name__} is not one checkpoints can rebuild (SGD, Adam, AdamW)")
    engine = trainer.engine
    tensors: dict[str, np.ndarray] = {f"param/{n}": a for n, a in sorted(engine.host_params().items())}
    for n, slots in sorted(engine.host_states().items()):
        tensors.update({f"state/{n}/{k}": v for k, v in sorted(slots.items())})
    tensors.update({f"master/{n}": v for n, v in sorted(engine.host_master().items())})
    hyper = {k: (list(v) if isinstance(v, tuple) else v) for k, v in opt.hyperparameters().items()}
    hyper["lr"] = trainer.base_lr
    options = {k: trainer.options.get(k) for k in ("backend", "wrt", "alignment", "optimize_backward", "clip_grad_norm", "accumulate")}
    info = {"format": FORMAT, "optimizer": {"name": opt.name, "t": opt.t, **hyper}, "steps": trainer.steps,
            "history": trainer.history, "schedule": _schedule_json(trainer.schedule), "options": options,
            "loss_scale": None if trainer.scaler is None else {**dataclasses.asdict(trainer.scaler)}}
    meta = {"rlx_training": json.dumps(info), "rlx_graph": to_json(trainer.graph)}
    tmp, _ = fileio.write_temp(os.fspath(path), lambda f: write_tensors(f, tensors, meta))
    fileio.commit(tmp, os.fspath(path))


def _get(info: Mapping[str, Any], key: str, kind: Any, where: str) -> Any:
    value = info.get(key) if isinstance(info, Mapping) else None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float, (int, float))):
        raise TrainingError(f"{where}: field {key!r} is missing or not a {getattr(kind, '__name__', kind)}")
    return value


def load(path: Any, *, max_bytes: int = MAX_BYTES, **overrides: Any) -> Any:
    """A trainer rebuilt from ``path``: the graph recompiled, then params, optimizer state, master
    copies, steps, history and loss-scale state restored. ``overrides`` replace compile options
    (``backend=``, ``mesh=``, ``schedule=`` (needed when the run used a custom callable) ...)."""
    from rlx.ir.serialize import from_json
    from rlx.train.compile import compile_training
    from rlx.train.grads import LossScaler

    where = f"checkpoint {os.fspath(path)!r}"
    tensors, meta = read_tensors(path, max_bytes)
    try:
        info = json.loads(meta.get("rlx_training", ""))
    except (json.JSONDecodeError, RecursionError):
        raise TrainingError(f"{where}: metadata 'rlx_training' is missing or not JSON") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise TrainingError(f"{where}: not an {FORMAT} checkpoint")
    try:
        graph = from_json(meta.get("rlx_graph", ""))
    except RlxError as exc:
        raise TrainingError(f"{where}: the training graph does not load: {exc}") from None
    opt_info = dict(_get(info, "optimizer", dict, where))
    name = opt_info.pop("name", None)
    t = opt_info.pop("t", None)
    if name not in ("sgd", "adam", "adamw") or type(t) is not int or t < 0:
        raise TrainingError(f"{where}: optimizer {name!r} / step {t!r} is not a saved SGD, Adam or AdamW")
    lr = opt_info.pop("lr", None)
    options = dict(_get(info, "options", dict, where))
    sched_info = info.get("schedule")
    schedule = None
    if isinstance(sched_info, dict) and "warmup_cosine" in sched_info:
        try:
            schedule = WarmupCosine(**sched_info["warmup_cosine"])
        except TypeError as exc:
            raise TrainingError(f"{where}: schedule: {exc}") from None
    elif sched_info is not None and "schedule" not in overrides:
        raise TrainingError(f"{where}: the run used a custom schedule ({sched_info.get('callable')}); pass schedule= to load")
    scale_info = info.get("loss_scale")
    params = {k[len("param/"):]: v for k, v in tensors.items() if k.startswith("param/")}
    kw: dict[str, Any] = {"wrt": options.get("wrt"), "backend": options.get("backend") or "numpy",
                          "alignment": options.get("alignment") or 64, "optimize_backward": options.get("optimize_backward", True),
                          "clip_grad_norm": options.get("clip_grad_norm"), "accumulate": options.get("accumulate") or 1,
                          "schedule": schedule, "loss_scale": LossScaler(**scale_info) if isinstance(scale_info, dict) else None}
    kw.update(overrides)
    try:
        trainer = compile_training(graph, optimizer=name, lr=lr, params=params, **kw, **opt_info)
    except TypeError as exc:
        raise TrainingError(f"{where}: bad saved options: {exc}") from None
    states: dict[str, dict[str, np.ndarray]] = {}
    master: dict[str, np.ndarray] = {}
    for key, value in tensors.items():
        parts = key.split("/")
        if parts[0] == "state" and len(parts) == 3 and parts[1] in trainer.trainable and parts[2] in trainer.optimizer.slots:
            states.setdefault(parts[1], {})[parts[2]] = value
        elif parts[0] == "master" and len(parts) == 2 and parts[1] in trainer.engine.host_master():
            master[parts[1]] = value
        elif parts[0] != "param":
            raise TrainingError(f"{where}: unexpected tensor {key!r}")
    held = trainer.engine.host_states() if t else {}
    for n, slots in states.items():
        for k, v in slots.items():
            want = held.get(n, {}).get(k)
            ref = trainer.engine.host_master().get(n, trainer.engine.host_params()[n]) if want is None else want
            if v.shape != ref.shape:
                raise TrainingError(f"{where}: state/{n}/{k} has shape {list(v.shape)}, the param {list(ref.shape)}")
    trainer.engine.load({}, states, master)
    trainer.optimizer.t = t
    trainer.steps = _get(info, "steps", int, where)
    history = _get(info, "history", list, where)
    trainer.history = [float(x) for x in history if isinstance(x, (int, float))]
    return trainer
