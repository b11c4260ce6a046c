"""``pow(x, 2)`` and ``pow(x, 3)`` imported as the products torch and onnxruntime compute: their
numbers bit for bit on every runner (NumPy's libm ``power`` differs by an ulp on ~30% of cubes),
other exponents, dtypes and non-constant exponents still as ``pow``."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import rlx  # noqa: E402
import rlx.onnx  # noqa: E402
import rlx.torch  # noqa: E402

X = (np.random.default_rng(0).standard_normal((64, 96)) * 3).astype(np.float32)


class Powers(torch.nn.Module):
    def __init__(self, exponent: float):
        super().__init__()
        self.exponent = exponent

    def forward(self, x):
        return torch.pow(x, self.exponent) + 0.5 * x


def _ops(g: rlx.Graph) -> list[str]:
    return [n.attrs.get("op", n.op) if n.op == "binary" else n.op for n in g.nodes]


@pytest.mark.parametrize("exponent", [2, 3, 3.0])
@pytest.mark.parametrize("runner", ["reference", "numpy", "torch", "jax"])
def test_torch_pow_by_two_and_three_gives_torch_bits(exponent, runner):
    m = Powers(exponent)
    want = m(torch.from_numpy(X)).numpy()
    g, params = rlx.torch.import_module(m, (torch.from_numpy(X),))
    assert "pow" not in _ops(g)
    feed = {next(iter(g.inputs())): X}
    got = rlx.run(g, feed, params)[0] if runner == "reference" else rlx.compile(g, backend=runner, params=params).run(feed)[0]
    if runner == "jax":  # XLA may contract x * x + 0.5 * x into fused multiply-adds
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, want)
    assert np.mean(np.power(X, np.float32(exponent)) + 0.5 * X != want) > 0.01 or exponent == 2  # pow would differ


@pytest.mark.parametrize("exponent", [2.5, -1.0])
def test_other_torch_exponents_stay_pow(exponent):
    m = Powers(exponent)
    x = np.abs(X) + 0.1
    g, params = rlx.torch.import_module(m, (torch.from_numpy(x),))
    assert "pow" in _ops(g)
    np.testing.assert_allclose(rlx.run(g, {next(iter(g.inputs())): x}, params)[0], m(torch.from_numpy(x)).numpy(), rtol=1e-6)


def test_f16_torch_pow_stays_pow():
    m = Powers(3)
    x = (X / 3).astype(np.float16)
    g, params = rlx.torch.import_module(m, (torch.from_numpy(x),))
    assert "pow" in _ops(g)
    got = rlx.run(g, {next(iter(g.inputs())): x}, params)[0]
    np.testing.assert_allclose(got.astype(np.float32), m(torch.from_numpy(x)).float().numpy(), rtol=2e-3, atol=2e-3)


def _pow_model(exponent: np.ndarray, as_initializer: bool, x_shape=(None, None)) -> onnx.ModelProto:
    nodes = [helper.make_node("Pow", ["x", "e"], ["y"])]
    inits = [numpy_helper.from_array(exponent, "e")] if as_initializer else []
    if not as_initializer:
        nodes.insert(0, helper.make_node("Constant", [], ["e"], value=numpy_helper.from_array(exponent, "e")))
    g = helper.make_graph(nodes, "pow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def _ort_run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("exponent", [np.float32(3.0), np.array([2.0], np.float32), np.int64(3)])
def test_onnx_constant_exponents_give_onnxruntime_bits(exponent):
    model = _pow_model(np.asarray(exponent), as_initializer=False)
    want = _ort_run(model, X)
    g, params = rlx.onnx.import_model(model, input_shapes={"x": X.shape})
    assert "pow" not in _ops(g)
    for got in (rlx.run(g, {"x": X}, params)[0], rlx.compile(g, params=params).run({"x": X})[0]):
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_onnx_exponent_that_would_broadcast_or_is_a_param_stays_pow():
    wide = _pow_model(np.full((1, 1, 1), 3.0, np.float32), as_initializer=False)  # [1,1,1] widens a rank-2 x
    g, params = rlx.onnx.import_model(wide, input_shapes={"x": X.shape})
    assert "pow" in _ops(g)
    got = rlx.run(g, {"x": X}, params)[0]
    assert got.shape == (1, *X.shape)
    np.testing.assert_allclose(got, _ort_run(wide, X), rtol=1e-6)
    initializer = _pow_model(np.float32(3.0), as_initializer=True)  # a float initializer imports as a param
    g, params = rlx.onnx.import_model(initializer, input_shapes={"x": X.shape})
    assert "pow" in _ops(g)
    np.testing.assert_allclose(rlx.run(g, {"x": X}, params)[0], _ort_run(initializer, X), rtol=1e-6)


def _exported_ops(g: rlx.Graph, params) -> list[str]:
    return [nd.op_type for nd in rlx.onnx.export(g, params).graph.node]


def test_export_writes_imported_squares_and_cubes_back_as_pow():
    """torch's gelu_new cube and RMSNorm square leave the export as the ``Pow`` onnxruntime's fusions
    look for, computed by the same products (bit for bit), the cube's square not left behind."""
    class GeluNewRms(torch.nn.Module):
        def forward(self, x):
            cube = 0.5 * x * (1.0 + torch.tanh(0.79788456 * (x + 0.044715 * torch.pow(x, 3.0))))
            return cube * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    g, params = rlx.torch.import_module(GeluNewRms(), (torch.from_numpy(X),))
    assert "pow" not in _ops(g)
    ops = _exported_ops(g, params)
    assert ops.count("Pow") == 2 and ops.count("Mul") == 5  # 0.5·x, ·(1 + tanh), 0.79788456·, 0.044715·, ·rsqrt; no x·x
    model = rlx.onnx.export(g, params)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: X})[0]
    x = X.astype(np.float64)  # the formula in f64 (torch's own multi-threaded tanh drifted by up to 8% near -1 in some runs)
    want = 0.5 * x * (1.0 + np.tanh(0.79788456 * (x + 0.044715 * x ** 3))) / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # tanh / rsqrt kernels differ


def test_a_square_read_elsewhere_is_kept_and_other_products_stay_mul():
    g = rlx.Graph("squares")
    x, y = g.input("x", (4, 6)), g.input("y", (4, 6))
    sq = x * x
    g.set_outputs([sq * x, sq + 1.0, x * y, g.cast(x, rlx.DType.F16) * g.cast(x, rlx.DType.F16)])
    ops = _exported_ops(g, {})
    assert ops.count("Pow") == 2  # the cube and the square the add reads; x·y and the f16 square stay Mul
    assert ops.count("Mul") == 2
    feed = {"x": X[:4, :6], "y": X[4:8, :6]}
    sess = ort.InferenceSession(rlx.onnx.export(g, {}).SerializeToString(), providers=["CPUExecutionProvider"])
    xs, ys = feed["x"], feed["y"]
    for got, want in zip(sess.run(None, feed), [(xs * xs) * xs, xs * xs + np.float32(1.0), xs * ys]):  # the f32 products
        np.testing.assert_array_equal(got, want)


def test_onnx_complex_exponent_is_not_read_as_its_real_part():
    """3+2j must not become x·x·x (NumPy's float() would drop the imaginary part): the import keeps
    a pow or refuses with an RlxError."""
    model = _pow_model(np.complex64(3 + 2j), as_initializer=False)
    try:
        g, _ = rlx.onnx.import_model(model, input_shapes={"x": X.shape})
    except rlx.RlxError:
        return
    assert "pow" in _ops(g)
