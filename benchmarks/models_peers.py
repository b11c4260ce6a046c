"""Real models and model-shaped graphs through ``rlx.torch.import_module`` and through ONNX: every rlx
backend vs torch eager and onnxruntime, and the numpy executor vs the reference interpreter, in one run.

Run: .venv/bin/python benchmarks/models_peers.py [--threads N] [--repeat 5] [--only NAME] [--set real|shapes|all] [--skip-compile]

Models (random init, eval mode, small configs): ``real`` = timm ResNet-18 / MobileNetV3-S / EfficientNet-B0
/ ConvNeXt-atto / RegNetY-200MF (1x3x112²), timm ViT-Ti/16 (224²), transformers BERT / DistilBERT / GPT-2 /
Llama / Qwen2 (hidden 256, 4 layers, 128 tokens); ``shapes`` = model-shaped ``torch.nn`` modules written here (a ResNet-style CNN, an
MLP-Mixer, a ViT encoder, a GPT-style decoder, a 4-layer MLP). timm / transformers need torchvision,
whose CPU wheel cannot load its compiled ops here: tests/models/zoo.py declares the two op schemas
it needs (``torchvision_without_compiled_ops``) and is imported for that.

Contenders, NumPy in / NumPy out (``--engines``: only ``rlx numpy``, ``rlx onnxruntime`` / ``openvino`` / ``auto``
and the peers): ``rlx.run`` (the reference interpreter); ``rlx numpy``
(``rlx.compile`` defaults: kernels without ``kernel_into`` adopt their fresh result, weight-only
nodes computed once when params are bound) and ``rlx numpy slots`` (``adopt=False,
fold_weights=False``: every node in its planned slot, every node on every run, as before); ``rlx torch`` (eager fx module);
``rlx torch inductor`` (``mode="inductor"``: the fx module through ``torch.compile``); ``rlx onnxruntime``;
``rlx openvino``; ``rlx auto`` (``backend="auto"`` with ``threads`` and the model's feed: its calibration
choice is printed); ``rlx jax``
(XLA); the torch module itself under ``torch.inference_mode()`` (``torch eager``) and through ``torch.compile``
(``--skip-compile`` leaves out both Inductor contenders: their compilation takes minutes per model on 2 cores). No
hand-written JAX version of these models exists, so ``rlx jax`` has no ``jax.jit`` peer here (``backends_peers.py``
has one on the kernels and the transformer layer). Through ONNX:
the module exported with ``torch.onnx.export`` (TorchScript exporter) run by onnxruntime
(``ort (onnx file)``) and by OpenVINO at f32 (``ov (onnx file)``, ``compiled_model(inputs)``)
against ``rlx.onnx.import_model`` of the same file compiled for the
``onnxruntime`` backend (``rlx ort (onnx import)``). Medians of interleaved rounds, process CPU
time per call; ratios against torch eager, against the best engine (the fastest of torch eager, ``torch.compile``,
onnxruntime and OpenVINO on the file), against ``rlx.run`` (numpy rows) and against the ONNX
file in onnxruntime. The two ONNX columns and the ``rlx.run`` / ``rlx numpy`` pair come from a second
interleaved measurement of each pair alone (at least 21 rounds, ~0.1 s of calls per sample), and so do the
best-engine ratios (the fastest rlx path, the best engine and ``rlx auto`` measured together alone): in the
round of all contenders a sample is one or two calls right after a slow contender, cold caches included. transformers models are
exported with an all-ones ``attention_mask`` (the same values as none). Dispatch overhead per
node = (exe.run - the sum of its steps run bare) / steps.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from exec_peers import _threads

THREADS = _threads(sys.argv) or os.cpu_count() or 1
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(THREADS)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import REPO_DIR, calls_for, measure, print_footer, print_header, print_table  # noqa: E402
from torch import nn  # noqa: E402

import rlx  # noqa: E402
import rlx.onnx  # noqa: E402
import rlx.torch  # noqa: E402


class Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        same = stride == 1 and cin == cout
        self.down = None if same else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNetish(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.blocks = nn.Sequential(Block(32, 32, 1), Block(32, 64, 2), Block(64, 128, 2), Block(128, 128, 1))
        self.head = nn.Linear(128, 100)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))


class Attention(nn.Module):
    def __init__(self, d: int, heads: int, causal: bool):
        super().__init__()
        self.qkv, self.proj, self.heads, self.causal = nn.Linear(d, 3 * d), nn.Linear(d, d), heads, causal

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).reshape(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        return self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=self.causal).transpose(1, 2).reshape(b, s, d))


class EncoderLayer(nn.Module):
    def __init__(self, d: int, heads: int, causal: bool = False):
        super().__init__()
        self.n1, self.att, self.n2 = nn.LayerNorm(d), Attention(d, heads, causal), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.att(self.n1(x))
        return x + self.mlp(self.n2(x))


class ViTish(nn.Module):
    def __init__(self, d: int = 192, heads: int = 3, layers: int = 4):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 16, 16)
        self.pos = nn.Parameter(torch.randn(1, 196, d) * 0.02)
        self.layers = nn.Sequential(*[EncoderLayer(d, heads) for _ in range(layers)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 1000)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2) + self.pos
        return self.head(self.norm(self.layers(x)).mean(dim=1))


class MixerLayer(nn.Module):
    def __init__(self, tokens: int, d: int):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.tok = nn.Sequential(nn.Linear(tokens, 128), nn.GELU(), nn.Linear(128, tokens))
        self.ch = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.tok(self.n1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.ch(self.n2(x))


class Mixer(nn.Module):
    def __init__(self, d: int = 256, layers: int = 4):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 16, 16)
        self.layers = nn.Sequential(*[MixerLayer(196, d) for _ in range(layers)])
        self.head = nn.Linear(d, 1000)

    def forward(self, x):
        return self.head(self.layers(self.patch(x).flatten(2).transpose(1, 2)).mean(dim=1))


class GPTish(nn.Module):
    def __init__(self, vocab: int = 1000, d: int = 256, heads: int = 4, layers: int = 4, seq: int = 128):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.randn(1, seq, d) * 0.02)
        self.layers = nn.Sequential(*[EncoderLayer(d, heads, causal=True) for _ in range(layers)])
        self.norm, self.out = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        return self.out(self.norm(self.layers(self.tok(ids) + self.pos)))


def mlp():
    return nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


SHAPES = {
    "resnet-ish 112²": lambda: (ResNetish(), (torch.randn(1, 3, 112, 112),), {}),
    "mlp-mixer 224² d256 l4": lambda: (Mixer(), (torch.randn(1, 3, 224, 224),), {}),
    "vit 224² d192 l4": lambda: (ViTish(), (torch.randn(1, 3, 224, 224),), {}),
    "gpt d256 l4 s128": lambda: (GPTish(), (torch.randint(0, 1000, (1, 128)),), {}),
    "mlp 4 layers b64": lambda: (mlp(), (torch.randn(64, 512),), {}),
}


def _timm(name: str, size: int, **kw):
    def build():
        import timm

        return timm.create_model(name, pretrained=False, num_classes=100, **kw), (torch.randn(1, 3, size, size),), {}

    return build


_HF = {"vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 1024,
       "max_position_embeddings": 128}


def _hf(config_cls: str, model_cls: str, **config):
    def build():
        import transformers

        cfg = getattr(transformers, config_cls)(**config)
        model = getattr(transformers, model_cls)(cfg)
        model.config.use_cache = False
        return model, (), {"input_ids": torch.randint(0, 1000, (1, 128))}

    return build


REAL = {
    "timm resnet18 112²": _timm("resnet18", 112),
    "timm mobilenetv3_small_100 112²": _timm("mobilenetv3_small_100", 112),
    "timm efficientnet_b0 112²": _timm("efficientnet_b0", 112),
    "timm convnext_atto 112²": _timm("convnext_atto", 112),
    "timm regnety_002 112²": _timm("regnety_002", 112),
    "timm vit_tiny_patch16_224": _timm("vit_tiny_patch16_224", 224),
    "hf bert h256 l4 s128": _hf("BertConfig", "BertModel", **_HF),
    "hf distilbert h256 l4 s128": _hf("DistilBertConfig", "DistilBertModel", vocab_size=1000, dim=256, n_layers=4, n_heads=4,
                                      hidden_dim=1024, max_position_embeddings=128),
    "hf gpt2 h256 l4 s128": _hf("GPT2Config", "GPT2LMHeadModel", vocab_size=1000, n_embd=256, n_layer=4, n_head=4, n_positions=128),
    "hf llama h256 l4 s128": _hf("LlamaConfig", "LlamaForCausalLM", **{**_HF, "intermediate_size": 688}, num_key_value_heads=2),
    "hf qwen2 h256 l4 s128": _hf("Qwen2Config", "Qwen2ForCausalLM", **{**_HF, "intermediate_size": 688}, num_key_value_heads=2),
}


def _first_tensor(out) -> torch.Tensor:
    from torch.utils._pytree import tree_leaves

    return next(t for t in tree_leaves(out) if isinstance(t, torch.Tensor))


def _onnx_file(module, args, kwargs) -> bytes | None:
    """The module through torch's TorchScript ONNX exporter (None, with the reason printed, when it fails)."""
    import io
    import warnings

    class Positional(nn.Module):  # keyword inputs as positional ones, the first output only
        def __init__(self):
            super().__init__()
            self.inner = module

        def forward(self, *tensors):
            kw = dict(zip(kwargs, tensors[len(args):]))
            if "input_ids" in kw and "attention_mask" not in kw:  # the all-ones mask (what no mask means): without
                kw["attention_mask"] = torch.ones_like(kw["input_ids"])  # it transformers traces aten::diff, unexportable
            return _first_tensor(self.inner(*tensors[:len(args)], **kw))

    buf = io.BytesIO()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(Positional().eval(), (*args, *kwargs.values()), buf, dynamo=False, opset_version=18)
    except Exception as exc:  # the exporter's many failure types
        print(f"    torch.onnx.export failed: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
        return None
    return buf.getvalue()


def _openvino_file(blob: bytes, feed_values: list[np.ndarray]):
    """torch's ONNX file compiled by OpenVINO for the CPU at f32 (its bf16 default misses a 1e-3 check) and
    THREADS threads, called the way its documentation shows (``compiled_model(inputs)``); None without openvino."""
    try:
        import openvino
    except ImportError:
        return None
    core = openvino.Core()
    compiled = core.compile_model(core.read_model(blob), "CPU", {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY",
                                                                 "INFERENCE_NUM_THREADS": str(THREADS)})
    ov_feed = dict(zip(range(len(compiled.inputs)), feed_values))
    return lambda: compiled(ov_feed)[0]


def contenders(make, skip_compile: bool = False, engines: bool = False) -> tuple[dict, rlx.Graph, object, dict]:
    """name -> zero-argument callable returning the first output; the imported graph; the numpy executable; the feed.
    ``engines``: only rlx numpy and the engine-backed contenders (no slots, jax, torch backend)."""
    module, args, kwargs = make()
    module = module.eval()
    g, params = rlx.torch.import_module(module, args, kwargs=kwargs)
    feed = {n: t.numpy() for n, t in zip(g.inputs(), [*args, *kwargs.values()])}
    exes = {
        "rlx numpy": rlx.compile(g, params=params),
        "rlx numpy slots": None if engines else rlx.compile(g, params=params, adopt=False, fold_weights=False),
        "rlx torch": None if engines else rlx.compile(g, backend="torch", params=params),
        "rlx torch inductor": None if skip_compile or engines else rlx.compile(g, backend="torch", params=params, mode="inductor"),
        "rlx onnxruntime": rlx.compile(g, backend="onnxruntime", params=params, threads=THREADS),
        "rlx openvino": _maybe(lambda: rlx.compile(g, backend="openvino", params=params, threads=THREADS)),
        "rlx jax": None if engines else rlx.compile(g, backend="jax", params=params),
        "rlx auto": rlx.compile(g, backend="auto", params=params, threads=THREADS, inputs=feed, device="cpu"),
    }
    from rlx.backends.auto import explain

    choice = explain(g, threads=THREADS, inputs=feed)
    print(f"    auto chose {exes['rlx auto'].backend}: " + (", ".join(f"{k} {v * 1e3:.3g} ms" for k, v in choice.medians.items())
                                                         if choice else "cached"), file=sys.stderr)
    fns = {"rlx.run": lambda: rlx.run(g, feed, params)[0]}
    fns.update({k: (lambda e=e: e.run(feed)[0]) for k, e in exes.items() if e is not None})

    def call(fn):
        with torch.inference_mode():
            return _first_tensor(fn(*args, **kwargs)).numpy()

    fns["torch eager"] = lambda: call(module)
    if not skip_compile:
        compiled = torch.compile(module)
        fns["torch.compile"] = lambda: call(compiled)
    blob = _onnx_file(module, args, kwargs)
    if blob is not None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads, opts.log_severity_level = THREADS, 1, 3
        sess = ort.InferenceSession(blob, opts, providers=["CPUExecutionProvider"])
        onnx_feed = {i.name: a for i, a in zip(sess.get_inputs(), feed.values())}
        fns["ort (onnx file)"] = lambda: sess.run(None, onnx_feed)[0]
        ov_file = _maybe(lambda: _openvino_file(blob, list(feed.values())))
        if ov_file is not None:
            fns["ov (onnx file)"] = ov_file
        try:
            g2, p2 = rlx.onnx.import_model(blob)
            exe2 = rlx.compile(g2, backend="onnxruntime", params=p2, threads=THREADS)
            feed2 = dict(zip(g2.inputs(), feed.values()))
            fns["rlx ort (onnx import)"] = lambda: exe2.run(feed2)[0]
        except rlx.RlxError as exc:
            print(f"    rlx.onnx.import_model failed: {exc}", file=sys.stderr)
    return fns, g, exes["rlx numpy"], feed


def _maybe(make):
    """``make()``, or None with the reason printed when it raises (a contender that cannot be built is left out)."""
    try:
        return make()
    except Exception as exc:  # any framework's failure type
        print(f"    {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
        return None


ENGINES = ("torch eager", "torch.compile", "ort (onnx file)", "ov (onnx file)")
ONNX_PAIR = ("ort (onnx file)", "rlx ort (onnx import)")
PAIRS = (ONNX_PAIR, ("rlx.run", "rlx numpy"))


def geomean(v: list[float]) -> float:
    return math.exp(sum(map(math.log, v)) / len(v))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default=None, help="substrings of the model names to run, comma-separated")
    ap.add_argument("--set", choices=("real", "shapes", "all"), default="all")
    ap.add_argument("--skip-compile", action="store_true", help="leave out rlx torch inductor and torch.compile")
    ap.add_argument("--engines", action="store_true", help="only rlx numpy, the engine-backed rlx backends and the peers")
    args = ap.parse_args()
    torch.set_num_threads(THREADS)
    models = {**(REAL if args.set != "shapes" else {}), **(SHAPES if args.set != "real" else {})}
    if args.only:
        models = {name: make for name, make in models.items() if any(part in name for part in args.only.split(","))}
        if not models:
            raise SystemExit(f"--only {args.only!r} names none of the models ({', '.join(REAL | SHAPES)})")
    if any(k in REAL for k in models):
        sys.path.insert(0, os.path.join(REPO_DIR, "tests", "models"))
        import zoo  # noqa: F401  (makes torchvision, hence timm and transformers, importable)
    print_header("models: rlx backends vs torch eager and onnxruntime, numpy executor vs rlx.run (models_peers.py)",
                 f"torch {torch.__version__}; threads = {THREADS}; medians of {args.repeat} interleaved rounds, process CPU time per call")
    cols = ["rlx.run", "rlx numpy", "rlx numpy slots", "rlx torch", "rlx torch inductor", "rlx onnxruntime", "rlx openvino",
            "rlx jax", "rlx auto", "torch eager", "torch.compile", "ort (onnx file)", "ov (onnx file)", "rlx ort (onnx import)"]
    if args.engines:
        cols = [c for c in cols if c not in ("rlx numpy slots", "rlx torch", "rlx torch inductor", "rlx jax")]
    rows, vs_torch, vs_ref, vs_ort, vs_best, auto_vs_fastest, best_rows = [], {}, {}, [], [], [], []
    for name, make in models.items():
        torch.manual_seed(0)
        fns, g, exe, feed = contenders(make, args.skip_compile, args.engines)
        ref = fns["rlx.run"]()
        if args.engines:  # the reference checks the outputs; its timing belongs to the numpy rows only
            del fns["rlx.run"]
        errs = {}
        for k, f in list(fns.items()):  # the first call also compiles (Inductor, XLA): a failure drops the contender
            try:
                errs[k] = float(np.max(np.abs(f() - ref)) / (np.max(np.abs(ref)) + 1e-30))
            except Exception as exc:  # any framework's failure type
                print(f"    {k} failed: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
                del fns[k]
        number = min(calls_for(f, 0.05) for f in fns.values())
        t = measure(fns, args.repeat, number=number, gc_off=False, warmup=True)
        ms = {k: v.median_cpu * 1e3 for k, v in t.items()}
        # each target ratio from its two contenders alone, warm, enough calls per sample
        for names in PAIRS if not args.engines else (ONNX_PAIR,):
            pair = {k: fns[k] for k in names if k in fns}
            if len(pair) == 2:
                tp = measure(pair, max(args.repeat, 21), number=min(calls_for(f, 0.1) for f in pair.values()), gc_off=False,
                             warmup=True)
                ms.update({k: v.median_cpu * 1e3 for k, v in tp.items()})
        steps, frame, fed = exe._steps, exe._free[0], {nid: feed[name] for name, nid in exe._input_ids}

        def bare(exe=exe, frame=frame, fed=fed):  # one frame's run: the nodes, without the feed check and the frame pool
            exe._run_frame(frame, fed)

        bare_ms = measure({"b": bare}, args.repeat, number=number, gc_off=False)["b"].median_cpu * 1e3
        per_node_us = (ms["rlx numpy"] - bare_ms) / max(len(steps), 1) * 1e3
        for k in fns:
            vs_torch.setdefault(k, []).append(ms[k] / ms["torch eager"])
        for k in ("rlx numpy", "rlx numpy slots"):
            if k in ms and "rlx.run" in ms:
                vs_ref.setdefault(k, []).append(ms[k] / ms["rlx.run"])
        onnx_ratio = ms["rlx ort (onnx import)"] / ms["ort (onnx file)"] if "rlx ort (onnx import)" in ms else float("nan")
        if onnx_ratio == onnx_ratio:
            vs_ort.append(onnx_ratio)
        fastest = min((k for k in ms if k.startswith("rlx") and "onnx import" not in k and k != "rlx.run"), key=ms.get)
        best = min((k for k in ENGINES if k in ms), key=ms.get)
        # the best-engine ratios from the fastest rlx path, the best engine and rlx auto measured alone (warm,
        # enough calls per sample), as the ONNX pair: in the all-contender rounds each follows a slow contender
        trio = {k: fns[k] for k in dict.fromkeys((fastest, best, "rlx auto")) if k in fns}
        tt = measure(trio, max(args.repeat, 21), number=min(calls_for(f, 0.1) for f in trio.values()), gc_off=False, warmup=True)
        ms.update({k: v.median_cpu * 1e3 for k, v in tt.items()})
        fastest = min((k for k in trio if k.startswith("rlx")), key=ms.get)
        best = min((k for k in ENGINES if k in ms), key=ms.get)
        vs_best.append(ms[fastest] / ms[best])
        if "rlx auto" in ms:
            auto_vs_fastest.append(ms["rlx auto"] / ms[fastest])
        best_rows.append([name, *(ms.get(k, float("nan")) for k in ENGINES), best, fastest, ms[fastest],
                          ms[fastest] / ms[best], ms.get("rlx auto", float("nan")) / ms[best],
                          ms.get("rlx auto", float("nan")) / ms[fastest]])
        rows.append([name, len(g), *(ms.get(k, float("nan")) for k in cols), ms["rlx numpy"] / ms.get("rlx.run", float("nan")),
                     f"{fastest} {ms[fastest] / ms['torch eager']:.3g}", onnx_ratio, per_node_us, f"{max(errs.values()):.1e}"])
        print(f"  {name}: " + ", ".join(f"{k} {v:.3g} ms" for k, v in ms.items()), file=sys.stderr, flush=True)
    print_table(["model", "nodes", *(f"{k} ms" for k in cols), "numpy / rlx.run", "fastest rlx / eager",
                 "rlx ort (onnx) / ort", "dispatch us/node", "max rel err"], rows)
    geo = [[k, geomean(v), geomean(vs_ref[k]) if k in vs_ref else float("nan")] for k, v in vs_torch.items()]
    print_table(["contender", "geomean / torch eager", "geomean / rlx.run"], geo, title="geometric means")
    if vs_ort:
        print(f"\nrlx ort (onnx import) / ort (onnx file): geomean {geomean(vs_ort):.3g} over {len(vs_ort)} models (target <= 1.0)")
    best = min((gm for gm in geo if gm[0].startswith("rlx") and "onnx import" not in gm[0] and gm[0] != "rlx.run"),
               key=lambda gm: gm[1])
    print(f"fastest rlx path: {best[0]} at {best[1]:.3g}x torch eager on the geomean (target <= 1.0)")
    print_table(["model", *(f"{k} ms" for k in ENGINES), "best engine", "fastest rlx", "fastest rlx ms", "fastest rlx / best",
                 "auto / best", "auto / fastest rlx"], best_rows, title="against the best engine a user could pick")
    print(f"\nfastest rlx / best engine: geomean {geomean(vs_best):.3g}, max {max(vs_best):.3g} (targets <= 1.0, <= 1.1)")
    if auto_vs_fastest:
        print(f"rlx auto / fastest rlx: geomean {geomean(auto_vs_fastest):.3g}, max {max(auto_vs_fastest):.3g} (target <= 1.05 each)")
    print_footer()


if __name__ == "__main__":
    main()
