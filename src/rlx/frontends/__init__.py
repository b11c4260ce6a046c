"""Readers of other formats that build rlx graphs: :mod:`.onnx` (ONNX files as shipped), :mod:`.torch`
(torch.export programs and ``.pt2`` archives), :mod:`.upstream` (upstream rlx-ir's serde JSON). They sit
below the backends (docs/architecture.md): a reader may build HIR, MIR or LIR, and the ONNX exporter
reads the dtype facts the reader defines (:mod:`.onnx.common`)."""
