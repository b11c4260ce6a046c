"""Helpers for reading pictures back: SVG through ElementTree, PNG headers by hand."""

from __future__ import annotations

import struct
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
XLINK = "{http://www.w3.org/1999/xlink}"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def read_svg(path) -> ET.Element:
    root = ET.parse(path).getroot()  # raises on malformed XML
    assert root.tag == f"{SVG}svg", root.tag
    return root


def svg_texts(root: ET.Element) -> list[str]:
    return [(t.text or "").strip() for t in root.iter(f"{SVG}text")]


def svg_nodes(root: ET.Element) -> dict[str, dict]:
    """Graphviz node groups by DOT id (``n3``): their texts, tooltip and shape fill colours."""
    out = {}
    for g in root.iter(f"{SVG}g"):
        if g.get("class") != "node":
            continue
        title = g.find(f"{SVG}title")
        tips = [a.get(f"{XLINK}title") for a in g.iter(f"{SVG}a") if a.get(f"{XLINK}title")]
        fills = [e.get("fill") for e in g.iter() if e.tag in (f"{SVG}path", f"{SVG}polygon", f"{SVG}ellipse") and e.get("fill")]
        out[title.text] = {"texts": svg_texts(g), "tooltip": tips[0] if tips else "", "fills": fills}
    return out


def svg_group_texts(root: ET.Element, cls: str) -> list[str]:
    """The texts of every ``<g class=cls>`` (graphviz: "cluster", "edge", "node"), in document order."""
    return [t for g in root.iter(f"{SVG}g") if g.get("class") == cls for t in svg_texts(g)]


def svg_clusters(root: ET.Element) -> list[str]:
    return svg_group_texts(root, "cluster")


def svg_edge_labels(root: ET.Element) -> list[str]:
    return svg_group_texts(root, "edge")


def png_size(path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk, after checking the signature."""
    with open(path, "rb") as fh:
        head = fh.read(24)
    assert head[:8] == PNG_SIGNATURE, head[:8]
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])
