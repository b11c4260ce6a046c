"""Gaussian splatting speed: the NumPy reference kernels against the dense JAX formulation.

Run: python benchmarks/splat_speed.py [--scenes 1000x128,10000x256] [--repeat 3] [--quick]

For each scene (N splats, a square image) it times, in alternation within a round: the NumPy
render (tile lists), the jitted dense JAX render (the lowering GPUs and TPUs use; forced here
with ``lowering_splat.DENSE_ON_CPU``), and both backward passes (the NumPy analytic backward
and ``jax.vjp`` of the dense render). Figures are medians of process CPU time (JAX's own threads
included) with wall medians beside them. No target: the ratio justifies running the NumPy
kernels on the host for CPU executables, and the same script on a GPU machine measures the
dense path there (``--device gpu``).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import measure, print_footer, print_header, print_table, ratio

import rlx
from rlx.ops.splat import render_meta

SCENE = ("positions", "scales", "rotations", "opacities", "colors", "sh_coeffs")


def scene(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """n splats of ~0.03 units in a 3-unit cube before the camera, SH band 3, as f32."""
    rng = np.random.default_rng(seed)
    feed = dict(positions=rng.uniform(-1.5, 1.5, 3 * n), scales=math.log(0.03) + rng.normal(0, 0.3, 3 * n),
                rotations=rng.normal(size=4 * n), opacities=rng.uniform(0, 2, n), colors=rng.uniform(0, 1, 3 * n),
                sh_coeffs=rng.normal(0, 0.1, n * 16 * 3))
    return {**{k: v.astype(np.float32) for k, v in feed.items()}, "meta": render_meta((0, 0, 4), (0, 0, 0), fov_y_degrees=50)}


def graphs(feed: dict[str, np.ndarray], size: int) -> tuple[rlx.Graph, rlx.Graph]:
    """The render graph and the backward of an L2 image loss (gradients of all six scene operands)."""
    attrs = dict(width=size, height=size, tile_size=16, max_list_entries=1 << 22, max_splat_steps=64)
    g = rlx.Graph("render")
    v = [g.input(k, [a.size], "f32") for k, a in feed.items()]
    img = g.gaussian_splat_render(*v, **attrs)
    g.set_outputs([img])
    loss = rlx.Graph("loss")
    v = [loss.input(k, [a.size], "f32") for k, a in feed.items()]
    d = loss.gaussian_splat_render(*v, **attrs) - 0.5
    loss.set_outputs([loss.sum(d * d)])
    return g, rlx.grad_with_loss(loss, wrt=list(SCENE))


def bench(n: int, size: int, repeat: int, device: str | None) -> list[list[str]]:
    """Table rows (render, backward) for one scene."""
    feed = scene(n)
    render, backward = graphs(feed, size)
    seeded = {**feed, "d_output": np.array(1.0, np.float32)}
    jr = rlx.compile(render, backend="jax", device=device)
    jb = rlx.compile(backward, backend="jax", device=device)
    jr.run(inputs=feed), jb.run(inputs=seeded)  # compile outside the timing
    t = measure({
        "numpy render": lambda: rlx.run(render, feed),
        "jax render": lambda: np.asarray(jr.run(inputs=feed)[0]),
        "numpy backward": lambda: rlx.run(backward, seeded),
        "jax backward": lambda: [np.asarray(a) for a in jb.run(inputs=seeded)],
    }, repeat=repeat)
    diff = float(np.abs(np.asarray(jr.run(inputs=feed)[0]) - rlx.run(render, feed)[0]).max())
    rows = []
    for what in ("render", "backward"):
        a, b = t[f"numpy {what}"], t[f"jax {what}"]
        rows.append([f"{n:,} splats, {size}²", what, f"{a.median_cpu:.3f}", f"{a.median_wall:.3f}", f"{b.median_cpu:.3f}",
                     f"{b.median_wall:.3f}", f"{ratio(b.median_cpu, a.median_cpu):.2f}", f"{diff:.1e}" if what == "render" else ""])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenes", default="1000x128,10000x256", help="comma-separated N x image size")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", default=None, help="jax device for the dense path (cpu, gpu, …; default: jax's)")
    ap.add_argument("--quick", action="store_true", help="one small scene, 2 rounds")
    args = ap.parse_args()
    from rlx.backends.jax import lowering_splat

    lowering_splat.DENSE_ON_CPU = True
    scenes = [(500, 64)] if args.quick else [tuple(int(p) for p in s.split("x")) for s in args.scenes.split(",")]
    print_header("Gaussian splatting: NumPy kernels (tile lists) vs the dense JAX lowering")
    rows = [row for n, size in scenes for row in bench(n, size, 2 if args.quick else args.repeat, args.device)]
    print_table(["scene", "pass", "numpy s (cpu)", "numpy s (wall)", "jax dense s (cpu)", "jax dense s (wall)", "jax/numpy (cpu)",
                 "max |Δ| image"], rows)
    print_footer()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
