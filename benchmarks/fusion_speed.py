"""Conv + bias + activation fusion on the numpy executor: CNNs through ``rlx.torch.import_module``, optimised
with and without ``fuse_conv_bias_act``, side by side in one run.

Run: .venv/bin/python benchmarks/fusion_speed.py [--threads N] [--repeat 7] [--set shapes|real|all] [--only NAME]

Every contender gets the same params. The imported graph first has its eval BatchNorms folded into the
convs (``rlx.opt.fold_affine``, not in the default pipeline) and its weight-only subgraphs (the scaled
conv weights and shifts) computed once (``rlx.opt.fold_weights``), then: ``unfused`` = ``rlx.optimize`` with every
default pass but ``fuse_conv_bias_act``; ``fused`` = the default pipeline; both compiled for
``backend="numpy"`` (``rlx.compile`` defaults). ``imported`` is the graph as imported (no folding, no
optimisation) on the numpy backend. ``torch backend unfused`` / ``fused``: the same two graphs on
``backend="torch"`` (eager fx module; the fused op is one ``F.conv2d`` with its bias, then the
activation). ``torch eager``: the module under ``torch.inference_mode()``. Medians of interleaved rounds
of process CPU time per call; ``fused / unfused`` is the pass's effect. Models: ``shapes`` =
models_peers.py's ResNet-style CNN and a 1-D conv stack written here; ``real`` = timm ResNet-18,
MobileNetV3-S, EfficientNet-B0 and ConvNeXt-atto at 1x3x112² (random init).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from exec_peers import _threads

THREADS = _threads(sys.argv) or os.cpu_count() or 1
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(THREADS)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import REPO_DIR, calls_for, measure, print_footer, print_header, print_table  # noqa: E402
from torch import nn  # noqa: E402

import rlx  # noqa: E402
import rlx.torch  # noqa: E402
from rlx.opt import default_passes, optimize  # noqa: E402
from rlx.opt.fold_affine import fold_conv_affine  # noqa: E402
from rlx.opt.fold_weights import fold_weights  # noqa: E402


def _conv1d_stack():
    layers: list[nn.Module] = []
    for cin, cout in ((16, 64), (64, 64), (64, 128), (128, 128)):
        layers += [nn.Conv1d(cin, cout, 5, padding=2), nn.GELU()]
    return nn.Sequential(*layers), (torch.randn(4, 16, 2048),), {}


def _shapes() -> dict:
    from models_peers import SHAPES

    return {"resnet-ish 112²": SHAPES["resnet-ish 112²"], "conv1d stack L2048": _conv1d_stack}


def _real() -> dict:
    from models_peers import REAL

    sys.path.insert(0, os.path.join(REPO_DIR, "tests", "models"))
    import zoo  # noqa: F401  (makes torchvision, hence timm, importable)

    return {k: v for k, v in REAL.items() if k.startswith("timm") and "vit" not in k}


def contenders(make) -> tuple[dict, dict]:
    module, args, kwargs = make()
    module = module.eval()
    g, params = rlx.torch.import_module(module, args, kwargs=kwargs)
    feed = {n: t.numpy() for n, t in zip(g.inputs(), args)}
    folded, bound = fold_weights(fold_conv_affine(g).graph, params)
    unfused_passes = [p for p in default_passes("numpy") if p.name != "fuse_conv_bias_act"]
    graphs = {"imported": g, "unfused": optimize(folded, unfused_passes)[0], "fused": optimize(folded)[0]}
    exes = {k: rlx.compile(v, params=params if k == "imported" else bound) for k, v in graphs.items()}
    exes.update({f"torch backend {k}": rlx.compile(graphs[k], backend="torch", params=bound) for k in ("unfused", "fused")})
    with torch.inference_mode():
        want = module(*args, **kwargs).numpy()
    for k, e in exes.items():  # every contender computes the module
        np.testing.assert_allclose(np.asarray(e.run(feed)[0]), want, rtol=2e-3, atol=2e-3, err_msg=k)
    fns = {k: (lambda e=e: e.run(feed)[0]) for k, e in exes.items()}

    def eager():
        with torch.inference_mode():
            return module(*args, **kwargs)

    fns["torch eager"] = eager
    counts = {k: sum(n.op == "fused_conv2d_bias_act" for n in v.nodes) for k, v in graphs.items()}
    counts["convs"] = sum(n.op == "conv2d" for n in g.nodes)
    counts["nodes"] = {k: len(v) for k, v in graphs.items()}
    return fns, counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=THREADS)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--set", choices=("shapes", "real", "all"), default="all")
    ap.add_argument("--only", default=None, help="run the models whose name contains this")
    a = ap.parse_args()
    torch.set_num_threads(THREADS)
    models = {**(_shapes() if a.set in ("shapes", "all") else {}), **(_real() if a.set in ("real", "all") else {})}
    if a.only:
        models = {k: v for k, v in models.items() if a.only in k}
    print_header("conv + bias + activation fusion on the numpy executor (fusion_speed.py)",
                 f"{THREADS} thread(s); medians of {a.repeat} interleaved rounds, process CPU time")
    cols = ["imported", "unfused", "fused", "torch backend unfused", "torch backend fused", "torch eager"]
    rows = []
    for name, make in models.items():
        fns, counts = contenders(make)
        ms = {k: t.median_cpu * 1e3 for k, t in measure(fns, a.repeat, number=calls_for(fns["fused"], 0.2, 50)).items()}
        nodes = counts["nodes"]
        rows.append([name, f"{counts['convs']} → {counts['fused']}", f"{nodes['unfused']} → {nodes['fused']}",
                     *(ms[k] for k in cols), ms["fused"] / ms["unfused"],
                     ms["torch backend fused"] / ms["torch backend unfused"], ms["fused"] / ms["torch eager"]])
        print(f"  {name}: done", file=sys.stderr)
    print_table(["model", "convs → fused", "nodes unfused → fused", *(f"{k} ms" for k in cols), "numpy fused / unfused",
                 "torch backend fused / unfused", "numpy fused / eager"], rows)
    print_footer()


if __name__ == "__main__":
    main()
