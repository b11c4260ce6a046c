"""A padded ModernBERT (sliding-window and global attention, padding rows fully masked) on the engine
backends against torch eager: a NaN on a fully masked query row must not reach the output (OpenVINO
spread one past the Where that zeroes such rows while the dropped keys' bias was -inf)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from models.zoo import ZOO
from models.zoo_check import import_entry, torch_outputs


@pytest.mark.parametrize("backend", ["onnxruntime", "openvino"])
def test_padded_modernbert_on_engines_matches_torch(backend):
    pytest.importorskip(backend)
    import rlx

    m = import_entry(next(e for e in ZOO if e.name == "modernbert"))
    assert (m.feed["attention_mask"] == 0).any()  # padding present: some query rows see no key
    want = torch_outputs(m)
    got = rlx.compile(m.graph, backend=backend, params=m.params).run(m.feed)
    for a, b in zip(got, want):
        assert not np.isnan(a).any()
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
