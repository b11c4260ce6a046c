"""Readers of other formats that build rlx graphs: :mod:`.onnx` (ONNX files as shipped), :mod:`.torch`
(torch.export programs and ``.pt2`` archives), :mod:`.upstream` (upstream rlx-ir's serde JSON). They share
a layer with the backends (docs/architecture.md) and neither imports the other: a reader may build HIR,
MIR or LIR; the ONNX format facts both the reader and the exporter read live in :mod:`rlx.ir.onnx_format`,
pow's multiplied powers in :mod:`rlx.ops.powers`."""
