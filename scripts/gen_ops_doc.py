"""Regenerate docs/ops.md from the op registry."""

from pathlib import Path

from rlx.ir.optable import render_op_table

if __name__ == "__main__":
    target = Path(__file__).resolve().parent.parent / "docs" / "ops.md"
    target.write_text(render_op_table(), encoding="utf-8")
    print(f"wrote {target}")
