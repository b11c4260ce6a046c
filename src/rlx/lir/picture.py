"""A picture of a buffer plan: one rectangle per slot over (time step, byte offset).

``draw_plan(lir, "plan.svg")`` writes a small hand-made SVG; any other suffix (``.png``,
``.pdf``) goes through matplotlib, imported only here and only then. Views are not drawn
(they live inside their root); in-place groups show as abutting rectangles at one offset.
"""

from __future__ import annotations

import colorsys
from html import escape
from typing import Any


def _rects(lir: Any) -> list[tuple[int, int, int, int, str, str]]:
    g, p = lir.graph, lir.plan
    out = []
    n = len(p.schedule)
    for nid, (birth, death) in sorted(p.lifetimes.items()):
        slot = p.assignments[nid]
        node = g.nodes[nid]
        label = f"%{nid} {node.op}" + (f" {node.name}" if node.name else "")
        kind = "param" if node.op in ("param", "constant") else ("output" if death >= n else "temp")
        out.append((birth, min(death, n) + 1, slot.offset, slot.size, label, kind))
    return out


def _color(i: int, kind: str) -> str:
    if kind == "param":
        return "#b0b0b0"
    h = (i * 0.61803398875) % 1.0
    r, g, b = colorsys.hls_to_rgb(h, 0.62 if kind == "temp" else 0.45, 0.55)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def draw_plan(lir: Any, path: str, width: int = 900, height: int = 520, title: str | None = None) -> str:
    """Write the picture of ``lir``'s plan to ``path`` (SVG by hand, else matplotlib); return the path."""
    rects = _rects(lir)
    p = lir.plan
    steps = max(1, len(p.schedule) + 1)
    top = max(1, p.arena_size)
    title = title or (f"{lir.graph.name}: arena {p.arena_size} B, lower bound {p.lower_bound} B "
                      f"({p.ratio:.3f}x), {p.heuristic}")
    if str(path).lower().endswith(".svg"):
        return _svg(rects, steps, top, p.lower_bound, path, width, height, title)
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    fig, ax = plt.subplots(figsize=(width / 100, height / 100), dpi=100)
    for i, (t0, t1, off, size, _label, kind) in enumerate(rects):
        ax.add_patch(Rectangle((t0, off), t1 - t0, size, facecolor=_color(i, kind), edgecolor="black", linewidth=0.3))
    ax.axhline(p.lower_bound, color="red", linestyle="--", linewidth=0.8, label="lower bound")
    ax.set_xlim(0, steps)
    ax.set_ylim(0, top * 1.02)
    ax.set_xlabel("schedule step")
    ax.set_ylabel("arena offset (bytes)")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return str(path)


def _svg(rects, steps, top, lower, path, width, height, title) -> str:
    ml, mr, mt, mb = 60, 10, 30, 30
    pw, ph = width - ml - mr, height - mt - mb
    sx, sy = pw / steps, ph / top

    def y(v: float) -> float:
        return mt + ph - v * sy

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="10">',
        f'<text x="{ml}" y="18" font-size="12">{escape(title)}</text>',
        f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>',
    ]
    for i, (t0, t1, off, size, label, kind) in enumerate(rects):
        parts.append(
            f'<rect x="{ml + t0 * sx:.2f}" y="{y(off + size):.2f}" width="{max((t1 - t0) * sx, 0.5):.2f}" '
            f'height="{max(size * sy, 0.5):.2f}" fill="{_color(i, kind)}" stroke="#000" stroke-width="0.3">'
            f"<title>{escape(label)}: [{off}, {off + size}) steps [{t0}, {t1})</title></rect>"
        )
    parts.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{y(lower):.2f}" y2="{y(lower):.2f}" stroke="red" stroke-dasharray="4,3"/>')
    parts.append(f'<text x="4" y="{y(lower):.2f}" fill="red">LB</text>')
    parts.append(f'<text x="4" y="{mt + 10}">{top} B</text><text x="{ml}" y="{height - 8}">step 0</text>')
    parts.append(f'<text x="{ml + pw - 40}" y="{height - 8}">step {steps - 1}</text></svg>')
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(parts))
    return str(path)
