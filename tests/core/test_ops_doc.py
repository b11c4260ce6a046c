"""docs/ops.md is generated from the registry and must be current."""

from pathlib import Path

import rlx
from rlx.ir.optable import render_op_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "ops.md"


def test_ops_doc_is_current():
    assert DOC.read_text(encoding="utf-8") == render_op_table(), "run: python scripts/gen_ops_doc.py"


def test_every_op_is_documented():
    text = render_op_table()
    for op in rlx.all_ops():
        if op.family not in ("test", "custom"):
            assert f"### `{op.name}`" in text
            assert op.doc.strip(), f"op {op.name} has no doc"
