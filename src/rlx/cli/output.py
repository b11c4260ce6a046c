"""``--json`` output: one JSON document on stdout, tagged with its schema name and version
(``{"schema": "rlx.inspect", "version": 1, …}``; docs/cli.md lists every field)."""

from __future__ import annotations

import json
import sys
from typing import Any

SCHEMA_VERSION = 1


def emit_json(schema: str, body: dict[str, Any]) -> None:
    doc = {"schema": f"rlx.{schema}", "version": SCHEMA_VERSION, **body}
    json.dump(doc, sys.stdout, indent=2, sort_keys=False, allow_nan=False, default=_default)
    sys.stdout.write("\n")
    sys.stdout.flush()


def _default(value: Any) -> Any:
    if hasattr(value, "item"):  # NumPy scalars
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def finite(x: float) -> float | None:
    """A float for JSON (NaN / infinities become null)."""
    x = float(x)
    return x if x == x and abs(x) != float("inf") else None
