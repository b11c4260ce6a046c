"""A loaded GGUF language model: compiled prefill / decode graphs, a KV cache the caller owns, sampling."""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from rlx.frontends.gguf import GgufError, GgufFile
from rlx.ir.errors import RlxError
from rlx.llm.config import FREQ_FACTORS, LlmConfig
from rlx.llm.graphs import NEG, Weights, build_decode, build_decode_cached, build_prefill, cached_decode_applies, kv_lanes, rope_rows
from rlx.llm.weights import to_f32
from rlx.ops.numerics import philox_f32, sample_rows

#: decode graphs are compiled for these cache capacities (the smallest that holds the sequence), then reused: steps
#: of 1.5x / 2x, because every decode step reads the whole capacity (masked slots included; 192 instead of 256
#: slots took the benchmark model's attention matmuls from 445 to 363 us per token on openvino, 1 thread)
CAPACITY_BUCKETS = (*(b for k in range(7, 16) for b in (1 << k, 3 << (k - 1))), 65536)
#: backends that run the prefill graph with a symbolic length; the others get static lengths of these buckets
SYMBOLIC_PREFILL = frozenset({"numpy"})
#: onnxruntime session settings of the LLM graphs (a caller's ``config=`` entries win): the intra-op pool's workers spin
#: 2 ms before they sleep, through the ~0.1 ms of Python between decode steps, as llama.cpp's threads do. With the
#: default short spin the benchmark model's Q4_0 step at 2 threads had llama.cpp's median per token but a tail (p99
#: 11-13 ms, mean 4.0-4.6 ms); spinning: p99 4.2-5.2 ms, mean 3.5-3.9 ms (docs/llm.md). Idle cores burn while a
#: generate runs, never after it.
ORT_SPIN = {"session.intra_op.spin_duration_us": "2000", "session.intra_op.spin_backoff_max": "1"}
#: backends whose decode step is the cached form (:func:`rlx.llm.graphs.build_decode_cached`): one fused kernel per
#: layer for rope + cache append + attention, appending in place (onnxruntime's GroupQueryAttention); the benchmark
#: model's Q4_0 step: 564 -> 320 onnxruntime nodes, 0.4-0.6 ms less per token at 1 and 2 threads (docs/llm.md)
CACHED_DECODE = frozenset({"onnxruntime"})
PREFILL_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)


def rope_tables(c: LlmConfig, n: int, freq_factors: np.ndarray | None = None, local: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin [n, n_rot/2] for positions 0..n-1: theta_i = base^(-2i/n_rot) / factor_i, position / linear factor,
    both times ``c.rope_mscale`` (``local``: gemma3's local layers, their own base, unscaled)."""
    base, factor = (c.rope_base_local, 1.0) if local else (c.rope_base, c.rope_linear_factor)
    inv = 1.0 / (base ** (np.arange(0, c.n_rot, 2, dtype=np.float64) / c.n_rot))
    if freq_factors is not None and not local:
        inv = inv / freq_factors.astype(np.float64)
    ang = np.outer(np.arange(n, dtype=np.float64) / factor, inv)
    return (c.rope_mscale * np.cos(ang)).astype(np.float32), (c.rope_mscale * np.sin(ang)).astype(np.float32)


class LlmModel:
    """``logits(ids)`` -> the last position's logits [vocab]; ``generate(ids, max_new_tokens)`` -> new ids."""

    def __init__(self, f: GgufFile, config: LlmConfig, weights: Weights, backend: str = "numpy",
                 options: dict[str, Any] | None = None, fallback: str | None = None):
        self.file, self.config, self.weights, self.backend = f, config, weights, backend
        self.fallback = fallback  # backend to use when ``backend`` cannot compile these graphs (backend="auto")
        self.options = dict(options or {})
        self._embed = weights.arrays["token_embd.weight"]
        ff = next((f.tensors[n] for n in FREQ_FACTORS if n in f.tensors), None)
        self._freq_factors = to_f32(ff).reshape(-1) if ff is not None else None
        self._prefill: dict[int | None, Any] = {}
        self._decode: dict[int, Any] = {}
        self._rope: dict[str, np.ndarray] = {"cos": np.zeros((0, 0), np.float32)}
        self.last_stats: dict[str, float] = {}
        self._local = threading.local()  # per thread: the decode steps' buffers (see DecodeStep)
        #: the decode step's form: the cached one (CachedDecodeStep) where the backend fuses it, else the masked one
        self.cached = backend in CACHED_DECODE and cached_decode_applies(config, weights)

    # ----------------------------------------------------------------- compiled graphs
    def _compile(self, graph: Any, inplace: dict[int, str] | None = None) -> Any:
        """``graph`` compiled on the model's backend, its engine session built now (so that a graph the engine cannot
        load falls back here, and a generate's timings leave the build out); ``inplace``: outputs the onnxruntime
        backend writes into inputs."""
        from rlx.runtime.compile import compile as rlx_compile

        if self.backend != "numpy":
            import rlx.backends  # noqa: F401  (registers the other backends)
        names = {n for n in graph.params()}
        params = {k: v for k, v in self.weights.arrays.items() if k in names}
        try:
            options = self.options
            if self.backend == "onnxruntime":  # the KV cache bound once; the cached step's new caches written into it
                options = {"bind_inputs": True, **({"inplace_outputs": inplace} if inplace else {}), **self.options,
                           "config": {**ORT_SPIN, **dict(self.options.get("config") or {})}}
            return _built(rlx_compile(graph, backend=self.backend, params=params, **options))
        except (RlxError, ValueError, MemoryError) as exc:  # e.g. an onnxruntime model past protobuf's 2 GB
            if self.fallback is None or self.fallback == self.backend:
                raise
            warnings.warn(f"rlx.llm: the {self.backend} backend cannot run {graph.name} ({type(exc).__name__}: "
                          f"{str(exc)[:200]}); using {self.fallback}", RuntimeWarning, stacklevel=3)
            self.backend, self.options = self.fallback, {}
            return rlx_compile(graph, backend=self.backend, params=params)

    def prefill_executable(self, n: int) -> tuple[Any, int | None]:
        """The compiled prefill for ``n`` tokens and its static length (None: symbolic)."""
        length = None if self.backend in SYMBOLIC_PREFILL else next((b for b in PREFILL_BUCKETS if b >= n), None)
        if length is None and self.backend not in SYMBOLIC_PREFILL:
            raise RlxError(f"{n} prompt tokens exceed the largest prefill bucket {PREFILL_BUCKETS[-1]}")
        if length not in self._prefill:
            self._prefill[length] = self._compile(build_prefill(self.config, self.weights, length))
        return self._prefill[length], length

    def decode_executable(self, capacity: int) -> Any:
        if capacity not in self._decode:
            c = self.config
            if self.cached:  # outputs 1.. are the layers' new keys and values, written into the input caches
                inplace = {1 + 2 * i + j: f"{kind}{i}" for i in range(c.n_layers) for j, kind in enumerate("kv")}
                self._decode[capacity] = self._compile(build_decode_cached(c, self.weights, capacity), inplace)
            else:
                self._decode[capacity] = self._compile(build_decode(c, self.weights, capacity))
        return self._decode[capacity]

    def _tables(self, n: int) -> dict[str, np.ndarray]:
        """The graphs' rope row inputs for positions 0 .. >= n-1 (cos, sin; gemma3 also cos_local, sin_local)."""
        if self._rope["cos"].shape[0] < n:
            c, rows = self.config, max(n, 2 * self._rope["cos"].shape[0], 256)
            heads = c.n_heads + c.n_kv_heads
            self._rope = dict(zip(("cos", "sin"), rope_rows(c, *rope_tables(c, rows, self._freq_factors), heads)))
            if c.rope_base_local:
                self._rope.update(zip(("cos_local", "sin_local"), rope_rows(c, *rope_tables(c, rows, local=True), heads)))
        return self._rope

    def _check_ids(self, ids: Iterable[int]) -> np.ndarray:
        arr = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids).reshape(-1)
        if arr.size == 0:
            raise RlxError("prompt_ids must hold at least one token id")
        if not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0 or arr.max() >= self.config.vocab:
            raise RlxError(f"token ids must be integers in [0, {self.config.vocab}), got {arr[:8].tolist()}...")
        return arr.astype(np.int64)

    def _run_prefill(self, ids: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        n = ids.shape[0]
        exe, length = self.prefill_executable(n)
        s = n if length is None else length
        rope = {k: t[:s] for k, t in self._tables(s).items()}
        padded = ids if s == n else np.concatenate([ids, np.zeros(s - n, np.int64)])
        outs = exe.run(inputs={"x": self._embed[padded], **rope, "last": np.array([n - 1])})
        return np.asarray(outs[0])[0], [np.asarray(o)[..., :n] if i % 2 == 0 else np.asarray(o)[:, :n] for i, o in enumerate(outs[1:])]

    # ----------------------------------------------------------------------- public API
    def logits(self, prompt_ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The logits [vocab] (f32) that follow ``prompt_ids``."""
        return self._run_prefill(self._check_ids(prompt_ids))[0].astype(np.float32, copy=True)

    def generate(self, prompt_ids: Sequence[int] | np.ndarray, max_new_tokens: int = 32, *, temperature: float = 0.0,
                 top_k: int = 0, top_p: float = 1.0, seed: int = 0, stop: Iterable[int] | None = None,
                 on_token: Callable[[int], Any] | None = None) -> list[int]:
        """New token ids after ``prompt_ids``: greedy when ``temperature`` is 0, else the ``sample`` op's rule
        (temperature, top-k, top-p) with Philox draw t of ``seed`` for token t. Stops after ``max_new_tokens`` or
        at a stop token (included; default: the file's EOS id)."""
        c = self.config
        ids = self._check_ids(prompt_ids)
        if max_new_tokens < 0:
            raise RlxError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
        stops = set(stop) if stop is not None else ({c.eos} if c.eos is not None else set())
        total = ids.shape[0] + max_new_tokens
        if total > CAPACITY_BUCKETS[-1]:
            raise RlxError(f"{total} tokens exceed the largest cache capacity {CAPACITY_BUCKETS[-1]}")
        draws = philox_f32(seed or 0xDEADBEEF, max(max_new_tokens, 1)) if temperature > 0 else None
        cap = next(b for b in CAPACITY_BUCKETS if b >= min(total, CAPACITY_BUCKETS[-1]))
        tc = time.perf_counter()  # the graphs this call runs, compiled first (with their engine sessions)
        self.prefill_executable(ids.shape[0])
        st = self._step(cap) if max_new_tokens > 1 else None  # a decode step follows: its buffers take the prefill's cache
        t0 = time.perf_counter()
        logits, kvs = self._run_prefill(ids)
        t1 = time.perf_counter()
        out: list[int] = []
        pos = ids.shape[0]
        if st is not None:
            st.reset(kvs, pos, c.sliding_window, self._tables(total))
            st.busy = True
            prepare, step_fn, advance, embed = st.prepare, st.call, st.advance, self._embed
        in_graph = 0.0  # seconds inside the compiled decode graph: the rest of the decode time is per-token Python
        fastest, mark = float("inf"), t1  # the fastest whole decode step (a figure a busy machine distorts least)
        try:
            for step in range(max_new_tokens):
                tok = self._pick(logits, temperature, top_k, top_p, draws, step)
                out.append(tok)
                if on_token is not None:
                    on_token(tok)
                if tok in stops or step == max_new_tokens - 1:
                    break
                prepare(embed[tok], pos)
                r0 = time.perf_counter()
                outs = step_fn()  # openvino: views of its request's memory, read before the next step
                in_graph += time.perf_counter() - r0
                logits = np.asarray(outs[0])[0]
                advance(outs, pos)
                pos += 1
                now = time.perf_counter()
                fastest, mark = min(fastest, now - mark), now
        finally:
            if st is not None:
                st.busy = False
        t2 = time.perf_counter()
        n_dec = max(len(out) - 1, 0)
        self.last_stats = {"compile_ms": (t0 - tc) * 1e3, "prefill_ms": (t1 - t0) * 1e3, "decode_s": t2 - t1, "decode_tokens": n_dec,
                           "decode_tokens_per_s": n_dec / (t2 - t1) if n_dec and t2 > t1 else 0.0,
                           "prompt_tokens": int(ids.shape[0]),
                           "decode_overhead_us_per_token": 1e6 * (t2 - t1 - in_graph) / n_dec if n_dec else 0.0,
                           "decode_ms_fastest_token": 1e3 * fastest if n_dec else 0.0}
        return out

    def _step(self, cap: int) -> DecodeStep | CachedDecodeStep:
        """This thread's decode step for capacity ``cap``: its buffers and bound call are reused by the next generate
        of the same capacity; one capacity is kept per thread (a cache of a long context can be large)."""
        steps = self._local.__dict__.setdefault("steps", {})
        st = steps.get(cap)
        if st is None or st.busy:  # busy: a generate called from an on_token callback gets buffers of its own
            exe = self.decode_executable(cap)
            if self.cached:
                st = CachedDecodeStep(self.config, exe, cap, rope_tables(self.config, cap, self._freq_factors))
            else:
                st = DecodeStep(self.config, exe, cap, {k: t.shape[1] for k, t in self._tables(cap).items()})
            if cap not in steps:
                steps.clear()  # a generate still using an evicted step holds it itself
                steps[cap] = st
        return st

    @staticmethod
    def _pick(logits: np.ndarray, temperature: float, top_k: int, top_p: float, draws: np.ndarray | None, step: int) -> int:
        if draws is None:
            return int(np.argmax(logits))
        row = np.asarray(logits, np.float32).reshape(1, -1)
        return int(sample_rows(row, draws[step:step + 1], temperature, top_k, top_p)[0])


class DecodeStep:
    """The decode step of one cache capacity: its input buffers, updated in place per token (the token's embedding
    row ``x``, its rope rows, the masks ``bias`` / ``bias_local``, the cache: keys [L, KV, hd, C] and values
    [L, KV, C, hd], fed per layer as contiguous views), and ``call()`` running the compiled step on them. Engines
    that can bind the buffers once (openvino: :meth:`~rlx.backends.openvino_backend.OpenVinoExecutable.bind`) then
    take no feed check, input copy or output copy per token (~0.1 ms of the benchmark model's step); the others
    get ``exe.run`` on the same arrays (onnxruntime's IO binding keeps them bound while they are the same objects)."""

    def __init__(self, c: LlmConfig, exe: Any, cap: int, rope_widths: dict[str, int]):
        self.config = c
        self.keys = np.zeros((c.n_layers, c.n_kv_heads, c.head_dim, cap), np.float32)
        self.values = np.zeros((c.n_layers, c.n_kv_heads, cap, c.head_dim), np.float32)
        self.bias = np.full((1, cap), NEG, np.float32)
        self.local = np.full((1, cap), NEG, np.float32)
        self.feed: dict[str, np.ndarray] = {"x": np.zeros((1, c.d_model), np.float32), "bias": self.bias}
        self.feed.update({name: np.zeros((1, w), np.float32) for name, w in rope_widths.items()})
        if c.sliding_window:
            self.feed["bias_local"] = self.local
        for i in range(c.n_layers):
            self.feed[f"k{i}"], self.feed[f"v{i}"] = self.keys[i], self.values[i]
        self.busy = False  # a generate is using the buffers
        self.window = 0
        self.rows: list[tuple[np.ndarray, np.ndarray]] = []  # (the feed's rope row, the table it is read from)
        self.call = _bound_call(exe, self.feed)

    def reset(self, kvs: list[np.ndarray], n: int, window: int, rope: dict[str, np.ndarray]) -> None:
        """The prefill's keys / values in slots 0..n-1, zeros after them; the masks opened for those slots (the local
        one, gemma2's, only for the last ``window``); the rope rows read from ``rope``'s tables from now on."""
        self.window, self.rows = window, [(self.feed[name], t) for name, t in rope.items()]
        for i in range(self.keys.shape[0]):
            self.keys[i, :, :, :n], self.values[i, :, :n, :] = kvs[2 * i], kvs[2 * i + 1]
        self.keys[..., n:] = 0.0
        self.values[:, :, n:, :] = 0.0
        self.bias[0, :n], self.bias[0, n:] = 0.0, NEG
        self.local[...] = self.bias
        if window:
            self.local[0, :max(n - window + 1, 0)] = NEG

    def prepare(self, row: np.ndarray, pos: int) -> None:
        """The inputs of the step at position ``pos``: the token's embedding row and its rope rows."""
        self.feed["x"][0] = row
        for buf, t in self.rows:
            buf[0] = t[pos]

    def advance(self, outs: list[np.ndarray], pos: int) -> None:
        """After the step at ``pos``: its keys / values written into slot pos of every layer, the slot unmasked."""
        c = self.config
        self.keys[:, :, :, pos] = kv_lanes(outs[1], c)
        self.values[:, :, pos, :] = kv_lanes(outs[2], c)
        self.bias[0, pos] = 0.0
        window = self.window
        if window:
            self.local[0, pos] = 0.0
            if pos + 1 - window >= 0:
                self.local[0, pos + 1 - window] = NEG  # out of the next query's window


class CachedDecodeStep:
    """The cached decode step of one capacity (:func:`rlx.llm.graphs.build_decode_cached`): its input buffers (the
    token's embedding row ``x``, its position ``pos``, the rope tables, per layer keys and values [1, KV, C, hd] as
    views of [L, 1, KV, C, hd] arrays) and ``call()``. The step returns every layer's caches with slot pos written;
    an engine that writes them into the inputs (onnxruntime's ``inplace_outputs``) returns the input arrays
    themselves and nothing is copied, the others' results are copied in."""

    def __init__(self, c: LlmConfig, exe: Any, cap: int, tables: tuple[np.ndarray, np.ndarray]):
        shape = (c.n_layers, 1, c.n_kv_heads, cap, c.head_dim)
        self.keys, self.values = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
        self.feed: dict[str, np.ndarray] = {"x": np.zeros((1, c.d_model), np.float32), "pos": np.zeros(1, np.int64),
                                            "cos": np.ascontiguousarray(tables[0]), "sin": np.ascontiguousarray(tables[1])}
        for i in range(c.n_layers):
            self.feed[f"k{i}"], self.feed[f"v{i}"] = self.keys[i], self.values[i]
        self.caches = [self.feed[f"{kind}{i}"] for i in range(c.n_layers) for kind in "kv"]  # the outputs' order
        self.busy = False
        self.call = _bound_call(exe, self.feed)

    def reset(self, kvs: list[np.ndarray], n: int, window: int, rope: dict[str, np.ndarray]) -> None:
        """The prefill's keys ([KV, hd, n]) and values ([KV, n, hd]) in slots 0..n-1, zeros after them (the rope
        tables are inputs of their own; cached_decode_applies excludes sliding windows)."""
        for i in range(self.keys.shape[0]):
            self.keys[i, 0, :, :n, :] = kvs[2 * i].transpose(0, 2, 1)
            self.values[i, 0, :, :n, :] = kvs[2 * i + 1]
        self.keys[:, :, :, n:, :] = 0.0
        self.values[:, :, :, n:, :] = 0.0

    def prepare(self, row: np.ndarray, pos: int) -> None:
        self.feed["x"][0] = row
        self.feed["pos"][0] = pos

    def advance(self, outs: list[np.ndarray], pos: int) -> None:
        for buf, new in zip(self.caches, outs[1:]):
            if new is not buf:  # an engine that returned new arrays: copy them in
                buf[...] = new


def _built(exe: Any) -> Any:
    """``exe`` with its engine session built (engines build it on the first run otherwise)."""
    session = getattr(exe, "session", None)
    if callable(session):
        session()
    return exe


def _bound_call(exe: Any, feed: dict[str, np.ndarray]) -> Callable[[], list[np.ndarray]]:
    """``exe`` run on ``feed``'s arrays: bound once where the engine can (openvino's ``bind``), else ``exe.run``."""
    bind = getattr(exe, "bind", None)
    return bind(feed) if bind is not None else lambda: exe.run(inputs=feed)


def check_vocab(f: GgufFile, c: LlmConfig) -> None:
    tokens = f.get("tokenizer.ggml.tokens")
    if isinstance(tokens, list) and len(tokens) > c.vocab:  # fewer is fine (an embedding padded past the vocabulary)
        raise GgufError(f"{f.path}: {len(tokens)} vocabulary tokens for an embedding of {c.vocab} rows")
