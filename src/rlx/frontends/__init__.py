"""Readers of other IRs' files that build rlx graphs: upstream rlx-ir's serde JSON
(:mod:`.upstream_json`, ``rlx.from_upstream_json``). They sit at the backends' layer: a
reader may build HIR, MIR or LIR, so it lives above all three (docs/architecture.md).
The ONNX and torch.export importers live with their backends (``rlx.backends``)."""
