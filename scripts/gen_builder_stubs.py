"""Regenerate src/rlx/ir/_builders.pyi (the Graph builder methods' type stubs) from the op registry."""

from pathlib import Path

import rlx
from rlx.ir.builder_stubs import render_builder_stubs

if __name__ == "__main__":
    target = Path(rlx.__file__).resolve().parent / "ir" / "_builders.pyi"
    target.write_text(render_builder_stubs(rlx.Graph.__dict__), encoding="utf-8")
    print(f"wrote {target}")
