"""``rlx convert``: an ONNX model, a torch.export program or upstream rlx-ir JSON to ``.rlx``
(read back and checked)."""

from __future__ import annotations

import argparse
import os

from rlx.cli import common
from rlx.cli.progress import step
from rlx.cli.summary import bytes_text
from rlx.viz.console import get_console


def run(args: argparse.Namespace) -> int:
    src = args.model
    if not src.lower().endswith((".onnx", ".pt2", ".json")):
        raise common.CliError(f"{src}: convert reads ONNX models (.onnx), torch.export programs (.pt2, from "
                              "torch.export.save) and upstream rlx-ir JSON documents (.json)")
    common.check_output_path(args.output)
    with step(f"importing {src}"):
        model = common.import_upstream(src) if src.lower().endswith(".json") else common.load_model(src)
    common.bind_dims(model, common.parse_dims(args.dim))
    with step(f"writing {args.output}"):
        kept = common.save_checked(model.obj, args.output, model.params)
    g = model.graph
    weights = sum(int(v.nbytes) for v in kept.values())
    get_console().table(f"converted {src}", ["name", "nodes", "inputs", "params", "outputs", "weights", "fingerprint"],
                        [(g.name, len(g), len(g.inputs()), len(g.params()), len(g.outputs), bytes_text(weights),
                          common.fingerprint(model.obj)[:16])], right=["nodes", "inputs", "params", "outputs"])
    get_console().line(f"wrote {args.output}" + (f" (+ {os.path.basename(args.output)}.safetensors)" if kept else "")
                       + ", read back and checked")
    return 0


def add_parser(sub: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    p = common.command_parser(sub, parent, "convert", run,
                              "convert an ONNX model, a torch.export program (.pt2) or upstream rlx-ir JSON to .rlx",
                              file_help=None)
    p.add_argument("model", help="model.onnx, model.pt2 written by torch.export.save, or an upstream rlx-ir .json document")
    p.add_argument("-o", "--output", required=True, help="output .rlx file (weights in OUTPUT.safetensors)")
    common.dim_argument(p)
