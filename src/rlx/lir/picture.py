"""A picture of a buffer plan: activations over (schedule step, byte offset), weights apart.

``draw_plan(lir, "plan.svg")`` writes a hand-made SVG; any other suffix (``.png``, ``.pdf``)
goes through matplotlib, imported only here and only then. The top panel holds the
activation buffers, one rectangle per slot over its lifetime, its y range only the offsets
activations use (weights live for the whole run and would otherwise flatten everything into
a strip); rectangles large enough carry their ``%id name`` label. The bottom strip lays the
weights (params and constants) side by side by size, the largest labelled. Views are not
drawn (they live inside their root); in-place groups abut at one offset.
"""

from __future__ import annotations

import colorsys
from dataclasses import dataclass
from html import escape
from typing import Any

from rlx.ir.atomic import atomic_open
from rlx.ir.units import format_bytes


@dataclass(frozen=True)
class Buffer:
    t0: int
    t1: int
    offset: int
    size: int
    label: str
    kind: str  # "weight" / "temp" / "output"


def buffers(lir: Any) -> list[Buffer]:
    g, p = lir.graph, lir.plan
    out = []
    n = len(p.schedule)
    for nid, (birth, death) in sorted(p.lifetimes.items()):
        slot = p.assignments[nid]
        node = g.nodes[nid]
        name = node.attrs["name"] if node.op in ("input", "param") else (node.name or node.op)
        kind = "weight" if node.op in ("param", "constant") else ("output" if death >= n else "temp")
        out.append(Buffer(birth, min(death, n) + 1, slot.offset, slot.size, f"%{nid} {name}", kind))
    return out


def _color(i: int, kind: str) -> str:
    h = (i * 0.61803398875) % 1.0
    if kind == "weight":
        r, g, b = colorsys.hls_to_rgb(0.11 + 0.05 * (i % 3), 0.72 - 0.06 * (i % 4), 0.45)
    else:
        r, g, b = colorsys.hls_to_rgb(h, 0.62 if kind == "temp" else 0.45, 0.55)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def _kib(n: int) -> str:
    return format_bytes(n)


def draw_plan(lir: Any, path: str, width: int = 900, height: int = 520, title: str | None = None) -> str:
    """Write the picture of ``lir``'s plan to ``path`` (SVG by hand, else matplotlib); return the path."""
    bufs = buffers(lir)
    p = lir.plan
    acts = [b for b in bufs if b.kind != "weight"]
    weights = sorted((b for b in bufs if b.kind == "weight"), key=lambda b: (-b.size, b.label))
    title = title or (f"{lir.graph.name}: arena {_kib(p.arena_size)}, lower bound {_kib(p.lower_bound)} "
                      f"({p.ratio:.3f}x), {p.heuristic}")
    if str(path).lower().endswith(".svg"):
        return _svg(acts, weights, len(p.schedule) + 1, p.lower_bound, path, width, height, title)
    return _matplotlib(acts, weights, len(p.schedule) + 1, p.lower_bound, path, width, height, title)


def _span(acts: list[Buffer]) -> tuple[int, int]:
    if not acts:
        return 0, 1
    return min(b.offset for b in acts), max(1, max(b.offset + b.size for b in acts))


def _weight_title(weights: list[Buffer]) -> str:
    total = sum(b.size for b in weights)
    return f"weights: {len(weights)} buffers, {_kib(total)}, live for the whole run"


def _matplotlib(acts, weights, steps, lower, path, width, height, title) -> str:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    lo, hi = _span(acts)
    fig, (ax, wx) = plt.subplots(2, 1, figsize=(width / 100, height / 100), dpi=100, height_ratios=(5, 1))
    for i, b in enumerate(acts):
        ax.add_patch(Rectangle((b.t0, b.offset), b.t1 - b.t0, b.size, facecolor=_color(i, b.kind), edgecolor="black",
                               linewidth=0.3))
        if (b.t1 - b.t0) / steps > 0.08 and b.size / (hi - lo) > 0.06:
            ax.text(b.t0 + 0.2, b.offset + b.size / 2, b.label, fontsize=6, va="center", clip_on=True)
    if lo <= lower <= hi:
        ax.axhline(lower, color="red", linestyle="--", linewidth=0.8, label="lower bound")
        ax.legend(loc="upper right", fontsize=7)
    ax.set_xlim(0, steps)
    ax.set_ylim(lo, lo + (hi - lo) * 1.02)
    ax.set_xlabel("schedule step", fontsize=8)
    ax.set_ylabel("activation offset (bytes)", fontsize=8)
    ax.set_title(title, fontsize=9)
    total = max(1, sum(b.size for b in weights))
    x = 0.0
    for i, b in enumerate(weights):
        wx.add_patch(Rectangle((x, 0), b.size / total, 1, facecolor=_color(i, "weight"), edgecolor="black", linewidth=0.3))
        if b.size / total > 0.08:
            wx.text(x + 0.005, 0.5, b.label, fontsize=6, va="center", clip_on=True)
        x += b.size / total
    wx.set_xlim(0, 1)
    wx.set_ylim(0, 1)
    wx.set_yticks([])
    wx.set_xticks([])
    wx.set_title(_weight_title(weights), fontsize=8)
    fig.tight_layout()
    with atomic_open(path, "wb") as fh:  # a file object: the format comes from the real suffix
        fig.savefig(fh, format=str(path).rsplit(".", 1)[-1].lower())
    plt.close(fig)
    return str(path)


def _svg(acts, weights, steps, lower, path, width, height, title) -> str:
    ml, mr, mt, mb, strip = 70, 10, 30, 30, 60
    pw, ph = width - ml - mr, height - mt - mb - strip - 20
    lo, hi = _span(acts)
    sx, sy = pw / steps, ph / (hi - lo)

    def y(v: float) -> float:
        return mt + ph - (v - lo) * sy

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="10">',
        f'<text x="{ml}" y="18" font-size="12">{escape(title)}</text>',
        f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>',
    ]
    for i, b in enumerate(acts):
        x0, top, w, h = ml + b.t0 * sx, y(b.offset + b.size), max((b.t1 - b.t0) * sx, 0.5), max(b.size * sy, 0.5)
        parts.append(f'<rect x="{x0:.2f}" y="{top:.2f}" width="{w:.2f}" height="{h:.2f}" fill="{_color(i, b.kind)}" '
                     f'stroke="#000" stroke-width="0.3"><title>{escape(b.label)}: [{b.offset}, {b.offset + b.size}) '
                     f"steps [{b.t0}, {b.t1})</title></rect>")
        if w > 6 * len(b.label) and h > 11:
            parts.append(f'<text x="{x0 + 2:.2f}" y="{top + h / 2 + 3:.2f}" font-size="9">{escape(b.label)}</text>')
    if lo <= lower <= hi:
        parts.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{y(lower):.2f}" y2="{y(lower):.2f}" stroke="red" stroke-dasharray="4,3"/>')
        parts.append(f'<text x="4" y="{y(lower):.2f}" fill="red">LB</text>')
    parts.append(f'<text x="4" y="{mt + 10}">{hi} B</text><text x="4" y="{mt + ph}">{lo} B</text>')
    parts.append(f'<text x="{ml}" y="{mt + ph + 14}">step 0</text><text x="{ml + pw - 50}" y="{mt + ph + 14}">step {steps - 1}</text>')
    wy = mt + ph + 36
    parts.append(f'<text x="{ml}" y="{wy - 4}">{escape(_weight_title(weights))}</text>')
    total = max(1, sum(b.size for b in weights))
    x = float(ml)
    for i, b in enumerate(weights):
        w = pw * b.size / total
        parts.append(f'<rect x="{x:.2f}" y="{wy}" width="{max(w, 0.5):.2f}" height="{strip - 20}" fill="{_color(i, "weight")}" '
                     f'stroke="#000" stroke-width="0.3"><title>{escape(b.label)}: {b.size} B at {b.offset}</title></rect>')
        if w > 6 * len(b.label):
            parts.append(f'<text x="{x + 2:.2f}" y="{wy + (strip - 20) / 2 + 3}" font-size="9">{escape(b.label)}</text>')
        x += w
    parts.append("</svg>")
    with atomic_open(path, "w") as fh:
        fh.write("\n".join(parts))
    return str(path)
