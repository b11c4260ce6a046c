"""``backend="auto"``: the fastest installed backend for this graph on this machine, chosen by measuring.

The rule:

1. ``device`` names a GPU (``"cuda"``, ``"gpu"``) or is None while a GPU is seen: the torch backend on
   CUDA when torch sees a GPU, else the JAX backend on its GPU.
2. On the CPU, the candidates are the installed backends that can run the graph: ``onnxruntime`` and
   ``openvino`` when the graph exports to ONNX, ``torch`` when every op has a torch device lowering and
   torch's own thread count equals ``threads`` (torch's is process-wide: the backend cannot set it),
   ``numpy`` always, and ``numpy jit`` (the numpy executor with ``kernels="jit"``) when numba is installed
   and the graph holds an op it has a compiled kernel for (:func:`rlx.runtime.jit_kernels.applies`: layer_norm
   [8, 128, 768] runs there in half torch's time); the two numpy ones with NumPy's BLAS on one thread, as
   compiled when chosen, where threadpoolctl is installed (:mod:`rlx.runtime.blas_threads`): OpenBLAS's
   workers slowed whatever was timed after them, at every thread count (docs/backends.md has the figures),
   and the numpy executor wins only graphs too small for BLAS to thread.
   Each is compiled, run once and checked against the numpy executor's outputs (a candidate that disagrees
   or fails is dropped, and so is one whose warm-up calls took over :data:`PRUNE` times the fastest one's), then timed in interleaved rounds
   (:data:`ROUNDS` rounds, each sample at least :data:`SAMPLE_SECONDS` of calls after :data:`WARM_CALLS`
   untimed one(s) lasting at least :data:`WARM_SECONDS`: the model warm and the engine timed before it quiet,
   as the caller runs it) on the caller's ``inputs=`` (an example feed) or
   on zeros of the declared shapes, the order rotated each round. A candidate's time is the lower quartile
   of its samples (:data:`QUANTILE`: a neighbour's interference only adds time); when the two fastest are
   within :data:`CLOSE` of each other, :data:`RUNOFF_ROUNDS` rounds of those two alone with longer samples
   (:data:`RUNOFF_SECONDS`) decide (a near tie is where load noise picked the slower engine); the smallest
   time wins. :func:`time_candidates` is this step, checked against the recorded zoo measurements by
   ``tests/backends/test_auto_rule.py``. The
   clock: process CPU time when ``threads=1`` (the work done, whoever's thread does it: OpenVINO runs
   its stream on a thread of its own, and on a shared machine the wall time of handing over to it
   measures the neighbours), wall time otherwise (CPU time would charge an engine for its threads).
3. The choice is cached per (graph fingerprint, input shapes and dtypes, threads): compiling the same
   graph again takes the winner without measuring. :func:`explain` returns the times measured.
4. A graph with symbolic dims and no ``inputs=`` cannot be timed: the fixed order onnxruntime, openvino,
   torch, numpy, numpy jit (the first that can run it; wave-2 and issue #38 figures: the engines beat torch and numpy
   on every model measured) decides.

``exe.backend`` tells which was chosen (``numpy`` for ``numpy jit``, whose executable has ``kernels == "jit"``).
Options: ``params``, ``device``, ``threads`` (passed to the
engines), ``inputs`` (the calibration feed); the chosen backend's other options need it named.
"""

from __future__ import annotations

import importlib.util
import itertools
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlx.ir.errors import RlxError
from rlx.runtime import blas_threads

_OPTIONS = ("params", "device", "threads", "inputs")
ROUNDS = 5
SAMPLE_SECONDS = 0.004
PRUNE = 3.0
CLOSE = 1.1  # the two fastest within 10% of each other: RUNOFF_ROUNDS more rounds of those two alone
RUNOFF_ROUNDS = 10
RUNOFF_SECONDS = 0.02  # the runoff's samples: longer, a near tie (ResNet-18: the engines 5-7% apart) needs the precision
QUANTILE = 25  # the percentile of a candidate's samples that stands for its time (see _statistic)
WARM_CALLS = 1  # untimed calls before each sample (the caches refilled after the other candidates ran) ...
WARM_SECONDS = 0.025  # ... and at least this long: the engine before it still spins its threads (see _rounds)
ENGINES = ("onnxruntime", "openvino")
ORDER = ("onnxruntime", "openvino", "torch", "numpy", "numpy jit")
_MODULES = {"onnxruntime": ("onnxruntime", "onnx"), "openvino": ("openvino", "onnx"), "torch": ("torch",), "numpy": (),
            "numpy jit": ()}


@dataclass
class Choice:
    """What ``backend="auto"`` picked for one graph and setting, and why."""

    backend: str
    medians: dict[str, float] = field(default_factory=dict)  # seconds per call, by candidate
    dropped: dict[str, str] = field(default_factory=dict)  # candidate -> why it did not run
    measured: bool = True


_CHOICES: dict[tuple, Choice] = {}
_CHOICES_LOCK = threading.Lock()


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _all_on_device(mir: Any) -> bool:
    from rlx.backends.torch_backend.lowering import DECOMPOSED, LEAVES, LOWERINGS

    return all(n.op in LOWERINGS or n.op in DECOMPOSED or n.op in LEAVES for n in mir.nodes)


def _gpu_choice(device: Any) -> tuple[str, dict[str, Any]] | None:
    if _installed("torch"):
        import torch

        if torch.cuda.is_available():
            return "torch", {"device": "cuda" if device in (None, "gpu") else device}
    if _installed("jax"):
        import jax

        if any(d.platform == "gpu" for d in jax.devices()):
            return "jax", {"device": "gpu"}
    return None


def _exports(mir: Any) -> bool:
    from rlx.backends.onnx import export

    try:
        export(mir)
    except RlxError:
        return False
    return True


def candidates(mir: Any, threads: int | None) -> list[str]:
    """The CPU backends that can run ``mir`` here, in the fixed order of rule 4."""
    found = []
    exports: bool | None = None
    for name in ORDER:
        if not all(_installed(m) for m in _MODULES[name]):
            continue
        if name in ENGINES:
            exports = _exports(mir) if exports is None else exports
            if not exports:
                continue
        if name == "torch":
            import torch

            if not _all_on_device(mir) or (threads is not None and torch.get_num_threads() != threads):
                continue
        if name == "numpy jit":
            from rlx.runtime.jit_kernels import applies, available

            if not (available() and applies(mir)):
                continue
        found.append(name)
    return found


def _backend(name: str, threads: int | None) -> tuple[str, dict[str, Any]]:
    """The backend a candidate compiles with and its options."""
    if name == "torch":
        return name, {"device": "cpu"}
    if name in ("numpy", "numpy jit"):
        options: dict[str, Any] = {"kernels": "jit"} if name == "numpy jit" else {}
        if blas_threads.available():  # BLAS on one thread: the module docstring, rule 2
            options["threads"] = 1
        return "numpy", options
    return name, {"threads": threads} if name in ENGINES and threads is not None else {}


def _calibration_feed(mir: Any, inputs: Mapping[str, Any] | None) -> dict[str, np.ndarray] | None:
    declared = mir.inputs()
    if inputs is not None:
        return {name: np.asarray(inputs[name]) for name in declared if name in inputs}
    if not all(v.node.shape.is_static for v in declared.values()):
        return None
    return {name: np.zeros(tuple(v.node.shape), v.node.dtype.numpy) for name, v in declared.items()}


def _zero_params(mir: Any) -> dict[str, np.ndarray] | None:
    declared = mir.params()
    if not all(v.node.shape.is_static for v in declared.values()):
        return None
    return {name: np.zeros(tuple(v.node.shape), v.node.dtype.numpy) for name, v in declared.items()}


def _agrees(got: list[np.ndarray], want: list[np.ndarray]) -> bool:
    """Whether a candidate's outputs are the numpy executor's up to float32 rounding: each element within
    1e-3 of its value plus 1e-3 of the output's largest magnitude (a deep network's rounding reaches
    a few 1e-4 of that, torch eager's own included: EfficientNetV2 differs from the numpy executor by
    2.5e-4 there, so every engine would be dropped at a tighter bound), NaN where it has NaN."""
    if len(got) != len(want):
        return False
    for a, b in zip(got, want):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return False
        if b.dtype.kind in "fc":
            scale = float(np.nanmax(np.abs(b))) if b.size and np.isfinite(b).any() else 0.0
            if not np.allclose(a, b, rtol=1e-3, atol=max(1e-3 * scale, 1e-6), equal_nan=True):
                return False
    return True


def _sample(exe: Any, feed: Mapping[str, np.ndarray], calls: int, clock: Any = time.perf_counter) -> float:
    start = clock()
    for _ in range(calls):
        exe.run(feed)
    return (clock() - start) / calls


def calibrate(mir: Any, names: list[str], feed: Mapping[str, np.ndarray], params: Mapping[str, Any] | None,
              threads: int | None) -> tuple[Choice, dict[str, Any]]:
    """Compile each candidate, check it against the numpy executor, time the survivors in interleaved
    rounds; the choice and the compiled executables by name."""
    from rlx.runtime.compile import compile as compile_for

    exes: dict[str, Any] = {}
    dropped: dict[str, str] = {}
    first: dict[str, list[np.ndarray]] = {}
    for name in ["numpy", *[n for n in names if n != "numpy"]]:
        try:
            backend, options = _backend(name, threads)
            exe = compile_for(mir, backend=backend, params=params, **options)
            outs = exe.run(dict(feed))
        except Exception as exc:  # any failure drops the candidate; numpy's failure is the caller's error
            if name == "numpy":
                raise
            dropped[name] = f"{type(exc).__name__}: {exc}"[:200]
            continue
        if name != "numpy" and not _agrees(outs, first["numpy"]):
            dropped[name] = "outputs differ from the numpy executor's"
            continue
        exes[name], first[name] = exe, outs
    if "numpy" not in names:
        exes.pop("numpy")
    clock = time.process_time if threads == 1 else time.perf_counter
    medians, slow = time_candidates(exes, feed, clock)
    dropped.update(slow)
    for name in slow:
        del exes[name]
    return Choice(min(medians, key=medians.__getitem__), medians, dropped), exes


def _statistic(samples: list[float]) -> float:
    """A candidate's time from its samples: the lower quartile. Interference on a shared machine only adds
    time (a neighbour's burst lands in some samples, not others); the median of samples of which about half
    hold a burst flips between the two modes, the lower quartile stays on the undisturbed one."""
    return float(np.percentile(samples, QUANTILE))


def time_candidates(exes: Mapping[str, Any], feed: Mapping[str, np.ndarray],
                    clock: Any = time.process_time) -> tuple[dict[str, float], dict[str, str]]:
    """Rule 2's timing: (median seconds per call by candidate, the candidates pruned with the reason).

    A warm-up estimates each candidate's call (the least of three samples of two calls, on ``clock``: a single
    wall-clock sample under load once put OpenVINO at 8x onnxruntime on EfficientNet, where it runs 1.1x);
    those over :data:`PRUNE` times the fastest are pruned; the rest run :data:`ROUNDS` interleaved rounds of
    samples of :data:`SAMPLE_SECONDS` on ``clock``; when the two fastest medians are within :data:`CLOSE`,
    :data:`RUNOFF_ROUNDS` rounds of those two alone, with samples of :data:`RUNOFF_SECONDS`, replace their
    medians (a near tie is decided by the runoff)."""
    estimate = {}
    for name, exe in exes.items():
        _sample(exe, feed, 2, clock)  # warm-up: an engine's first calls after compiling are slow
        estimate[name] = max(min(_sample(exe, feed, 2, clock) for _ in range(3)), 1e-7)
    fastest = min(estimate.values())
    slow = {n: f"{t / fastest:.1f}x the fastest candidate's warm-up time" for n, t in estimate.items() if t > PRUNE * fastest}
    names = [n for n in exes if n not in slow]  # the others cannot win: not worth the rounds
    samples: dict[str, list[float]] = {name: [] for name in names}
    calls = {name: max(1, int(SAMPLE_SECONDS / estimate[name])) for name in names}
    _rounds(exes, names, samples, feed, calls, clock, ROUNDS)
    medians = {name: _statistic(s) for name, s in samples.items()}
    ranked = sorted(medians, key=medians.__getitem__)
    if len(ranked) > 1 and medians[ranked[1]] < CLOSE * medians[ranked[0]]:  # a near tie: the two alone decide
        pair = ranked[:2]
        runoff: dict[str, list[float]] = {name: [] for name in pair}
        long_calls = {name: max(1, int(RUNOFF_SECONDS / estimate[name])) for name in pair}
        _rounds(exes, pair, runoff, feed, long_calls, clock, RUNOFF_ROUNDS)
        medians.update({name: _statistic(runoff[name]) for name in pair})
    return medians, slow


def _rounds(exes: Mapping[str, Any], names: list[str], samples: dict[str, list[float]], feed: Mapping[str, np.ndarray],
            calls: dict[str, int], clock: Any, rounds: int) -> None:
    """``rounds`` interleaved rounds of ``names``, the order rotated each round (drift hits all alike). Each
    sample follows :data:`WARM_CALLS` untimed call(s), :data:`WARM_SECONDS` at least: the candidate before it
    evicted this one's weights from the caches, and what the caller runs is the warm model (ResNet-18 at the
    zoo's size, 1 thread: ~1.6 ms a call in samples of three calls straight after the other engine, ~0.96 ms
    warm, on either engine); and an engine's worker threads spin for a while after its call, slowing whatever
    runs next on the same cores (LeViT-128S at 2 threads: OpenVINO 3.9 ms a call alone, onnxruntime 4.1-4.3;
    after one warm call straight after onnxruntime OpenVINO read 4.9-5.5 and lost; after ~13 ms of warm calls
    3.7-3.9, the order of the engines alone)."""
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = clock()
            for k in itertools.count():
                if k >= WARM_CALLS and clock() - start >= WARM_SECONDS:
                    break
                exes[name].run(feed)
            samples[name].append(_sample(exes[name], feed, calls[name], clock))


def _key(mir: Any, feed: Mapping[str, np.ndarray] | None, threads: int | None) -> tuple:
    from rlx.ir.serialize import fingerprint

    shapes = tuple(sorted((n, a.dtype.str, a.shape) for n, a in feed.items())) if feed is not None else None
    return fingerprint(mir), shapes, threads


def explain(obj: Any, threads: int | None = None, inputs: Mapping[str, Any] | None = None) -> Choice | None:
    """The cached choice for ``obj`` at this setting (None before the first ``backend="auto"`` compile)."""
    from rlx.runtime.compile import to_mir

    mir = to_mir(obj)
    with _CHOICES_LOCK:
        return _CHOICES.get(_key(mir, _calibration_feed(mir, inputs), threads))


def choose(obj: Any, device: Any = None, threads: int | None = None, inputs: Mapping[str, Any] | None = None,
           params: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """The backend name and its options that ``backend="auto"`` picks for ``obj`` (measuring if not cached)."""
    return _choose(obj, device, threads, inputs, params)[:2]


def _choose(obj: Any, device: Any, threads: int | None, inputs: Mapping[str, Any] | None,
            params: Mapping[str, Any] | None) -> tuple[str, dict[str, Any], Any]:
    from rlx.runtime.compile import to_mir

    wants_gpu = isinstance(device, str) and device.split(":")[0] in ("cuda", "gpu")
    if wants_gpu or device is None:
        found = _gpu_choice(device)
        if found is not None:
            return (*found, None)
        if wants_gpu:
            raise RlxError(f"backend='auto': device {device!r} requested but neither torch nor jax sees a GPU")
    if device not in (None, "cpu"):
        raise RlxError(f"backend='auto': device must be None, 'cpu', 'cuda[:N]' or 'gpu', got {device!r}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise RlxError(f"backend='auto': threads must be a positive int, got {threads!r}")
    mir = to_mir(obj)
    feed = _calibration_feed(mir, inputs)
    key = _key(mir, feed, threads)
    with _CHOICES_LOCK:
        cached = _CHOICES.get(key)
    if cached is not None:
        return (*_backend(cached.backend, threads), None)
    names = candidates(mir, threads)
    complete = set(params or ()) >= set(mir.params())  # every param given: the calibrated winner can be returned
    zeros = {} if complete else _zero_params(mir)  # timing does not depend on the weights' values
    exes: dict[str, Any] = {}
    if feed is None or zeros is None or len(names) == 1:
        choice = Choice(names[0], measured=False)
    else:
        choice, exes = calibrate(mir, names, feed, {**zeros, **(params or {})}, threads)
    with _CHOICES_LOCK:
        _CHOICES[key] = choice
    return (*_backend(choice.backend, threads), exes.get(choice.backend) if complete else None)


def compile_auto(obj: Any, **options: Any) -> Any:
    """``rlx.compile(obj, backend="auto", params=None, device=None, threads=None, inputs=None)``."""
    from rlx.runtime.compile import compile as compile_for

    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise RlxError(f"backend='auto' takes only {list(_OPTIONS)}; unknown option(s) {unknown} (name the backend to pass them)")
    params = options.get("params")
    name, extra, compiled = _choose(obj, options.get("device"), options.get("threads"), options.get("inputs"), params)
    if compiled is not None:
        return compiled
    return compile_for(obj, backend=name, **extra, **({"params": params} if params is not None else {}))
