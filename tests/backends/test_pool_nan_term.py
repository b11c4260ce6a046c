"""The max pool's NaN term over a relu's output (rlx.backends.onnx.exporter._window_nan, ``nonneg``): on
onnxruntime a unit-weight depthwise Conv sums each window (NaN exactly where one holds a NaN: a relu's
output has no -inf to meet a +inf) and its fused Clip(0, 0) sends every other sum to 0. Checked against
torch with a NaN / +inf / -inf at every cell of a window, in the blocked (NCHWc) conv layout and outside
it, on float32, float16 and bfloat16, on onnxruntime and OpenVINO (which keeps the Tanh form)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import rlx

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import rlx.torch  # noqa: E402
from rlx.backends.ort_backend import export_for_session  # noqa: E402

C, HW = 16, (9, 8)  # 3x3 / stride-2 windows, ceil mode: the last column's window is partial


def _cases() -> np.ndarray:
    """One batch item per case: a NaN, +inf or -inf at each cell of the window at output (1, 1)
    (rows 2-4, cols 2-4), NaN and +inf together, and NaN / +inf in the ceil-mode partial window."""
    rng = np.random.default_rng(0)
    items = []
    for value in (np.nan, np.inf, -np.inf):
        for i in range(3):
            for j in range(3):
                x = rng.standard_normal((C, *HW)).astype(np.float32)
                x[3, 2 + i, 2 + j] = value
                items.append(x)
    for nan_at, inf_at in (((2, 2), (4, 4)), ((4, 4), (2, 2)), ((3, 3), (2, 4))):  # NaN and +inf in one window
        x = rng.standard_normal((C, *HW)).astype(np.float32)
        x[(5, *nan_at)], x[(5, *inf_at)] = np.nan, np.inf
        items.append(x)
    for value in (np.nan, np.inf):
        x = rng.standard_normal((C, *HW)).astype(np.float32)
        x[7, HW[0] - 1, HW[1] - 1] = value
        items.append(x)
    return np.stack(items)


class _ReluPool(torch.nn.Module):
    """Per-channel identity convs around relu -> max pool: exact, and they put the pool in onnxruntime's
    blocked layout (``blocked``) without mixing a NaN into other channels."""

    def __init__(self, blocked: bool):
        super().__init__()
        self.blocked = blocked
        self.pre, self.post = (torch.nn.Conv2d(C, C, 1, groups=C) for _ in range(2))
        for conv in (self.pre, self.post):
            torch.nn.init.ones_(conv.weight)
            torch.nn.init.zeros_(conv.bias)
        self.pool = torch.nn.MaxPool2d(3, 2, ceil_mode=True)

    def forward(self, x):
        y = self.pool(torch.relu(self.pre(x) if self.blocked else x))
        return self.post(y) if self.blocked else y + 1.0


def _check(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _plain_on_onnxruntime(g, params):
    """The engine-neutral export (``0 · tanh`` of the window sums) in a plain onnxruntime session."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(export_for_session(g, params).SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return lambda feed: sess.run(None, feed)


@pytest.mark.parametrize("engine", ["onnxruntime", "openvino", "plain"])
@pytest.mark.parametrize("blocked", [True, False])
def test_relu_pool_nan_and_inf_at_every_window_cell(engine, blocked):
    """OpenVINO: the ±inf cases only, its Relu maps NaN to 0 before any pool sees it (not the pool's doing).
    ``plain``: the export for no engine in particular, run by onnxruntime."""
    x = _cases()
    if engine == "openvino":
        pytest.importorskip("openvino")
        x = x[~np.isnan(x).any(axis=(1, 2, 3))]
    mod = _ReluPool(blocked).eval()
    g, params = rlx.torch.import_module(mod, (torch.from_numpy(x),))
    run = (_plain_on_onnxruntime(g, params) if engine == "plain"
           else rlx.compile(g, backend=engine, params=params, threads=1).run)
    with torch.no_grad():
        want = mod(torch.from_numpy(x)).numpy()
    got = run(dict(zip(g.inputs(), [x])))[0]
    _check(got, want)
    nan_items = np.isnan(want).any(axis=(1, 2, 3)).sum()
    assert nan_items == (0 if engine == "openvino" else 9 + 3 + 1) and np.isposinf(want).any()


def test_onnxruntime_export_sums_relu_windows_and_other_engines_bound():
    """The onnxruntime backend's export of a relu -> max pool: unit-weight Conv + Clip, the plain export
    (which OpenVINO runs) ``0 · tanh`` of the sums; a max pool over a tensor that may be negative keeps the
    bounding pass (HardSigmoid on onnxruntime)."""
    mod = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.MaxPool2d(3, 2)).eval()
    x = np.random.default_rng(1).standard_normal((1, 4, 9, 9)).astype(np.float32)
    g, params = rlx.torch.import_module(mod, (torch.from_numpy(x),))
    ops = Counter(n.op_type for n in export_for_session(g, params, engine="onnxruntime").graph.node)
    assert ops["Clip"] == 1 and ops["HardSigmoid"] == 0 and ops["Tanh"] == 0, ops
    for engine in (None, "openvino"):
        model = export_for_session(g, params, engine=engine)
        ops = Counter(n.op_type for n in model.graph.node)
        assert ops["Tanh"] == 1 and ops["Mul"] == 1 and ops["Clip"] == 0, ops
        tanh = next(n for n in model.graph.node if n.op_type == "Tanh")
        assert next(n for n in model.graph.node if n.output[0] == tanh.input[0]).op_type == "Conv"
    signed = torch.nn.Sequential(torch.nn.MaxPool2d(3, 2)).eval()
    g, params = rlx.torch.import_module(signed, (torch.from_numpy(x),))
    ops = Counter(n.op_type for n in export_for_session(g, params, engine="onnxruntime").graph.node)
    assert ops["HardSigmoid"] == 1 and ops["Clip"] == 0, ops


def test_concat_of_relus_pools_without_bounding_pass():
    """A fire / inception module's concat of relus is never negative either: SqueezeNet's shape."""

    class Fire(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Conv2d(3, 8, 1), torch.nn.Conv2d(3, 8, 3, padding=1)
            self.pool = torch.nn.MaxPool2d(3, 2, ceil_mode=True)

        def forward(self, x):
            return self.pool(torch.cat([torch.relu(self.a(x)), torch.relu(self.b(x))], 1))

    torch.manual_seed(0)
    mod = Fire().eval()
    x = np.random.default_rng(2).standard_normal((2, 3, 10, 11)).astype(np.float32)
    x[0, 1, 4, 5], x[1, 0, 9, 10], x[1, 2, 0, 0] = np.nan, np.nan, np.inf
    g, params = rlx.torch.import_module(mod, (torch.from_numpy(x),))
    ops = Counter(n.op_type for n in export_for_session(g, params, engine="onnxruntime").graph.node)
    assert ops["Clip"] == 1 and ops["HardSigmoid"] == 0, ops
    exe = rlx.compile(g, backend="onnxruntime", params=params, threads=1)
    with torch.no_grad():
        want = mod(torch.from_numpy(x)).numpy()
    got = exe.run(dict(zip(g.inputs(), [x])))[0]
    _check(got, want)
    assert np.isnan(want).any() and not np.isnan(want).all()


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_low_precision_relu_pool(dtype):
    """float16 / bfloat16 pools: the term runs in float32 and is cast back (NaN kept, the rest 0); ONNX
    MaxPool takes no bfloat16, so a bf16 pool is pooled in float32 (exact: max selects an element)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    np_dtype = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}[dtype]
    x = _cases()[:, :4]
    g = rlx.Graph("relu_pool")
    low = g.cast(g.relu(g.input("x", x.shape, "f32")), to=dtype)  # what autocast writes; onnxruntime has no bf16 Relu
    pooled = g.pool2d(low, kind="max", kernel_size=[3, 3], stride=[2, 2], padding=[1, 1])
    g.set_outputs([g.cast(pooled, to="f32")])  # onnxruntime's Python API returns no bf16 array
    from rlx.backends.onnx import export

    ops = Counter(n.op_type for n in export(g, {}, engine="onnxruntime").graph.node)
    assert ops["Clip"] == 1, ops  # bf16: MaxPool has no bf16, the pool itself runs in float32
    xl = x.astype(np_dtype)
    with torch.no_grad():  # exact: max pooling selects one of the (already rounded) elements
        want = torch.nn.functional.max_pool2d(torch.relu(torch.from_numpy(xl.astype(np.float32))), 3, 2, 1).numpy()
    got = rlx.compile(g, backend="onnxruntime", threads=1).run({"x": x})[0]
    _check(got, want)
    assert np.isnan(want).any() and np.isposinf(want).any()


def test_pool_of_a_ceil_mode_pool_of_relu():
    """GoogLeNet's pool branch: a stride-1 max pool reading a ceil-mode max pool (its -inf fill never wins a
    window) of a relu is never negative either: both pools sum their windows, torch's values kept."""
    mod = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.MaxPool2d(3, 2, ceil_mode=True),
                              torch.nn.MaxPool2d(3, 1, padding=1, ceil_mode=True)).eval()
    x = _cases()[:, :8]
    g, params = rlx.torch.import_module(mod, (torch.from_numpy(x),))
    ops = Counter(n.op_type for n in export_for_session(g, params, engine="onnxruntime").graph.node)
    assert ops["Clip"] == 2 and ops["HardSigmoid"] == 0 and ops["Concat"] == 0, ops
    exe = rlx.compile(g, backend="onnxruntime", params=params, threads=1)
    with torch.no_grad():
        want = mod(torch.from_numpy(x)).numpy()
    got = exe.run(dict(zip(g.inputs(), [x])))[0]
    _check(got, want)
    assert np.isnan(want).any() and np.isposinf(want).any()


def test_negative_fill_is_not_nonneg():
    """A max pool over a relu concatenated with a negative (not -inf) block may be negative: bounded term."""

    class Cat(torch.nn.Module):
        def forward(self, x):
            pad = torch.full((x.shape[0], x.shape[1], 1, x.shape[3]), -2.0)
            return torch.nn.functional.max_pool2d(torch.cat([torch.relu(x), pad], 2), 3, 2)

    x = np.random.default_rng(4).standard_normal((1, 2, 8, 7)).astype(np.float32)
    g, params = rlx.torch.import_module(Cat().eval(), (torch.from_numpy(x),))
    ops = Counter(n.op_type for n in export_for_session(g, params, engine="onnxruntime").graph.node)
    assert ops["HardSigmoid"] == 1 and ops["Clip"] == 0, ops
