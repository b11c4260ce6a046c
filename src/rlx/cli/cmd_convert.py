"""``rlx convert``: an ONNX model, a torch.export program or upstream rlx-ir JSON to ``.rlx``
(read back and checked); ``--to upstream-json``: any model to upstream rlx-ir's serde JSON."""

from __future__ import annotations

import argparse
import os

from rlx.cli import common
from rlx.cli.progress import step
from rlx.cli.summary import bytes_text
from rlx.ir.atomic import atomic_open
from rlx.viz.console import get_console


def run(args: argparse.Namespace) -> int:
    if args.to == "upstream-json":
        return _to_upstream(args)
    src = args.model
    if not src.lower().endswith((".onnx", ".pt2", ".json")):
        raise common.CliError(f"{src}: convert reads ONNX models (.onnx), torch.export programs (.pt2, from "
                              "torch.export.save) and upstream rlx-ir JSON documents (.json)")
    common.check_output_path(args.output)
    with step(f"importing {src}"):
        model = _read(args, src)
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


def _read(args: argparse.Namespace, src: str) -> common.Model:
    """The model in ``src``: upstream JSON with ``--dim`` / ``--input-shape`` bound after reading, anything
    else through the command line's one opener (which applies them before an ONNX / .pt2 import)."""
    if not src.lower().endswith(".json"):
        return common.open_model(args, src)
    model = common.import_upstream(src)
    common.bind_dims(model, common.parse_dims(args.dim))
    common.bind_dims(model, common.dims_from_shapes(model.graph, common.parse_input_shapes(args.input_shape)))
    return model


def _to_upstream(args: argparse.Namespace) -> int:
    """Write the model as upstream JSON (rlx.to_upstream_json reads it back and compares it first)."""
    import rlx

    src = args.model
    common.check_output_path(args.output, (".json",), "upstream rlx-ir document")
    with step(f"reading {src}"):
        model = _read(args, src)
    obj = model.obj if model.policy is None else rlx.GraphModule(model.obj, rlx.FusionPolicy(model.policy))
    with step(f"writing {args.output}"):
        text = rlx.to_upstream_json(obj)
        with atomic_open(args.output, "w") as f:
            f.write(text)
    get_console().line(f"wrote {args.output} (upstream rlx-ir 0.2.1 JSON, {bytes_text(len(text))}), read back and compared"
                       + (f"; weights stay in {src}" if model.params else ""))
    return 0


def add_parser(sub: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    p = common.command_parser(sub, parent, "convert", run,
                              "convert an ONNX model, a torch.export program (.pt2) or upstream rlx-ir JSON to .rlx",
                              file_help=None)
    p.add_argument("model", help="model.onnx, model.pt2 written by torch.export.save, or an upstream rlx-ir .json document "
                                 "(with --to upstream-json also .rlx)")
    p.add_argument("-o", "--output", required=True, help="output .rlx file (weights in OUTPUT.safetensors), or .json with --to")
    p.add_argument("--to", choices=("rlx", "upstream-json"), default="rlx",
                   help="rlx (default) or upstream-json: write upstream rlx-ir 0.2.1 serde JSON (any model rlx reads)")
    common.dim_argument(p)
