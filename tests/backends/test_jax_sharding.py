"""Sharded runs over 8 simulated CPU devices equal the unsharded run.

Data parallelism splits the batch axis of the inputs over mesh axis "data"; tensor
parallelism splits weights Megatron-style over "model" (column-split first projection,
row-split second, so XLA inserts one all-reduce). The device count comes from XLA_FLAGS,
set in tests/conftest.py before jax is imported.
"""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import rlx  # noqa: E402
from backends.jax_cases import assert_close, compile_fn  # noqa: E402
from rlx.backends.jax import data_parallel  # noqa: E402

pytestmark = pytest.mark.skipif(
    len(jax.devices("cpu")) < 8,
    reason="needs 8 CPU devices: jax was imported before XLA_FLAGS=--xla_force_host_platform_device_count=8 was set",
)
compile_ = compile_fn()
B, S, D, H, F = 8, 16, 32, 4, 64


def _mesh(shape, names):
    return Mesh(np.array(jax.devices("cpu")[: int(np.prod(shape))]).reshape(shape), names)


def _block():
    """A pre-norm transformer block: attention (4 heads, causal) + gelu MLP, with residuals."""
    g = rlx.Graph("block")
    x = g.input("x", (B, S, D))
    p = {n: g.param(n, s) for n, s in [("ln1_g", (D,)), ("ln1_b", (D,)), ("wq", (D, D)), ("wk", (D, D)), ("wv", (D, D)),
                                        ("wo", (D, D)), ("ln2_g", (D,)), ("ln2_b", (D,)), ("w1", (D, F)), ("b1", (F,)),
                                        ("w2", (F, D)), ("b2", (D,))]}
    h = g.layer_norm(x, p["ln1_g"], p["ln1_b"])
    a = g.attention(h @ p["wq"], h @ p["wk"], h @ p["wv"], num_heads=H, head_dim=D // H, mask_kind="causal")
    x1 = x + a @ p["wo"]
    h2 = g.layer_norm(x1, p["ln2_g"], p["ln2_b"])
    y = x1 + g.gelu(h2 @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    g.set_outputs([y, g.mean(y)])
    return g


def _feed(g, seed=0):
    r = np.random.default_rng(seed)
    inputs = {n: r.standard_normal(tuple(v.shape)).astype(np.float32) for n, v in g.inputs().items()}
    params = {n: (r.standard_normal(tuple(v.shape)) * 0.2).astype(np.float32) for n, v in g.params().items()}
    return inputs, params


TENSOR_PARALLEL = {"wq": P(None, "model"), "wk": P(None, "model"), "wv": P(None, "model"), "wo": P("model", None),
                   "w1": P(None, "model"), "b1": P("model"), "w2": P("model", None)}


@pytest.mark.parametrize("kind", ["data", "tensor", "data+tensor"])
def test_sharded_block_equals_unsharded(kind):
    g = _block()
    inputs, params = _feed(g)
    want = compile_(g, backend="jax", params=params).run(inputs=inputs)
    assert_close(want, rlx.run(g, inputs, params), rtol=1e-4, atol=1e-4)
    if kind == "data":
        mesh, specs = _mesh((8,), ("data",)), {"x": P("data", None, None)}
    elif kind == "tensor":
        mesh, specs = _mesh((8,), ("model",)), dict(TENSOR_PARALLEL)
    else:
        mesh, specs = _mesh((2, 4), ("data", "model")), {"x": P("data", None, None), **TENSOR_PARALLEL}
    exe = compile_(g, backend="jax", mesh=mesh, in_shardings=specs, params=params)
    got = exe.run(inputs=inputs)
    assert_close(got, want, rtol=1e-5, atol=1e-5)
    for name, spec in specs.items():
        if name in params:
            assert exe._params[name].sharding.is_equivalent_to(NamedSharding(mesh, spec), len(g.params()[name].shape))
            assert len(exe._params[name].addressable_shards) == mesh.size
    outs = exe.run_device(inputs=inputs)
    if kind != "tensor":
        assert len({s.device for s in outs[0].addressable_shards}) == mesh.size


def test_data_parallel_helper_and_out_shardings():
    g = _block()
    inputs, params = _feed(g, seed=1)
    mesh = _mesh((8,), ("data",))
    specs = data_parallel(g)
    assert specs == {"x": P("data", None, None)}
    exe = compile_(g, backend="jax", mesh=mesh, in_shardings=specs, out_shardings=[P("data"), P()], params=params)
    outs = exe.run_device(inputs=inputs)
    assert outs[0].sharding.is_equivalent_to(NamedSharding(mesh, P("data")), 3)
    assert_close([np.asarray(o) for o in outs], compile_(g, backend="jax", params=params).run(inputs=inputs))


def test_bad_specs_are_named():
    g = _block()
    mesh = _mesh((8,), ("data",))
    with pytest.raises(rlx.RlxError, match="not inputs or params"):
        compile_(g, backend="jax", mesh=mesh, in_shardings={"nope": P("data")})
    with pytest.raises(rlx.RlxError, match=r"'b1'.*does not split"):
        compile_(g, backend="jax", mesh=_mesh((3,), ("data",)), in_shardings={"b1": P("data")})
    with pytest.raises(rlx.RlxError, match="mesh axis 'model'"):
        compile_(g, backend="jax", mesh=mesh, in_shardings={"x": P("model")})
    with pytest.raises(rlx.RlxError, match="need mesh"):
        compile_(g, backend="jax", in_shardings={"x": P("data")})
