"""HIR modules save and load with their fusion policy, weights and fingerprint intact."""

from __future__ import annotations

import numpy as np
import pytest

import rlx


def _module(policy=None):
    return rlx.define("layer", lambda h: h.linear(h.input("x", (2, 8)), h.param("w", (8, 8)),
                                                   bias=h.param("b", (8,)), activation="gelu"), policy)


@pytest.mark.parametrize("policy", [rlx.FusionPolicy.DIRECT, rlx.FusionPolicy.FUSABLE])
def test_module_round_trip(tmp_path, policy):
    m = _module(policy)
    back = rlx.from_json(rlx.to_json(m))
    assert back == m and back.stage is rlx.GraphStage.HIR and back.fusion_policy is policy
    assert rlx.fingerprint(back) == rlx.fingerprint(m)
    params = {"w": np.arange(64, dtype=np.float32).reshape(8, 8) / 64, "b": np.ones(8, np.float32)}
    rlx.save(m, tmp_path / "m.rlx", params=params)
    loaded = rlx.load(tmp_path / "m.rlx")
    assert loaded == m
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
    want = rlx.run(m.lower_to_mir(), {"x": x}, params)[0]
    got = rlx.run(loaded.lower_to_mir(), {"x": x}, {k: loaded.params[k] for k in params})[0]
    np.testing.assert_array_equal(got, want)


def test_policy_changes_the_fingerprint():
    assert rlx.fingerprint(_module("direct")) != rlx.fingerprint(_module("fusable"))


def test_bad_policy_is_a_format_error():
    doc = rlx.to_json(_module()).replace('"fusion_policy":"direct"', '"fusion_policy":"sideways"')
    with pytest.raises(rlx.FormatError, match="fusion_policy"):
        rlx.from_json(doc)
