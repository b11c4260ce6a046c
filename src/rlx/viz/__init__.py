"""Pictures and console tables for the ``rlx`` command line.

* :func:`to_dot` / :func:`draw_graph` — a HIR, MIR or LIR graph as Graphviz DOT text or an
  SVG (PNG, PDF …) rendered by the ``dot`` program: HIR blocks grouped into clusters, fused
  ops coloured, tensor shapes on the edges, provenance in the tooltips, buffer slots on LIR.
* :func:`draw_plan` — the memory-plan timeline (PNG through matplotlib, or SVG), drawn by
  :meth:`rlx.LirModule.draw`.
* :mod:`rlx.viz.console` — tables through ``rich`` when it is installed, plain text otherwise.

Nothing here is imported by ``import rlx``; Graphviz, matplotlib and rich are only needed
when a picture or a rich table is asked for.
"""

from rlx.viz.graph_svg import DotMissing, draw_graph, draw_plan, find_dot, render, to_dot

__all__ = ["DotMissing", "draw_graph", "draw_plan", "find_dot", "render", "to_dot"]
