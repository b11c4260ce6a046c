"""Human-readable sizes, shared by every report (HIR inspection, plan pictures, the CLI)."""

from __future__ import annotations


def format_bytes(n: int) -> str:
    """``B`` below 1 KiB, else KiB / MiB / GiB / TiB with one decimal (binary units: 1 KiB = 1024 B)."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")
