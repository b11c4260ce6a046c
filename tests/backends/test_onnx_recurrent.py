"""ONNX RNN / GRU / LSTM import as one ``scan`` node per direction, checked against onnxruntime;
the gradient through an imported LSTM against central finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import rlx.onnx  # noqa: E402

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
SEQ, BATCH, IN, HID = 5, 3, 4, 6


def _model(kind: str, *, nd: int = 1, layout: int = 0, seq_dim=SEQ, batch_dim=BATCH, with_state: bool = True,
           with_bias: bool = True, peepholes: bool = False, seq_lens: bool = False, outputs=("Y", "Y_h", "Y_c"),
           dtype=TensorProto.FLOAT, seed: int = 0, **attrs):
    """A one-node model: X (and initial states) are inputs, the weights initializers."""
    r = np.random.default_rng(seed)
    np_dtype = helper.tensor_dtype_to_np_dtype(dtype)
    g = GATES[kind]

    def init(name, shape):
        return helper.make_tensor(name, dtype, shape, (0.5 * r.standard_normal(shape)).astype(np_dtype).reshape(-1))

    xs = [batch_dim, seq_dim, IN] if layout else [seq_dim, batch_dim, IN]
    state = [batch_dim, nd, HID] if layout else [nd, batch_dim, HID]
    inputs = [helper.make_tensor_value_info("X", dtype, xs)]
    inits = [init("W", [nd, g * HID, IN]), init("R", [nd, g * HID, HID])]
    names = ["X", "W", "R", "", "", "", "", ""]
    if with_bias:
        inits.append(init("B", [nd, 2 * g * HID]))
        names[3] = "B"
    if seq_lens:
        inits.append(helper.make_tensor("L", TensorProto.INT32, [BATCH], [SEQ] * BATCH))
        names[4] = "L"
    if with_state:
        inputs.append(helper.make_tensor_value_info("H0", dtype, state))
        names[5] = "H0"
        if kind == "LSTM":
            inputs.append(helper.make_tensor_value_info("C0", dtype, state))
            names[6] = "C0"
    if peepholes:
        inits.append(init("P", [nd, 3 * HID]))
        names[7] = "P"
    while names and not names[-1]:
        names.pop()
    n_out = 3 if kind == "LSTM" else 2
    outs = [o if o in outputs else "" for o in ("Y", "Y_h", "Y_c")[:n_out]]
    while outs and not outs[-1]:
        outs.pop()
    node = helper.make_node(kind, names, outs, hidden_size=HID, layout=layout,
                            direction={1: "forward", 2: "bidirectional"}[nd] if "direction" not in attrs else attrs.pop("direction"),
                            **attrs)
    graph = helper.make_graph([node], "rnn", inputs, [helper.make_tensor_value_info(o, dtype, None) for o in outs if o],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def _feeds(model, sizes: dict[str, int], seed: int = 1) -> dict[str, np.ndarray]:
    r = np.random.default_rng(seed)
    out = {}
    for vi in model.graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else sizes[d.dim_param] for d in vi.type.tensor_type.shape.dim]
        out[vi.name] = r.standard_normal(dims).astype(helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
    return out


def _ort(model, feeds) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _batch_major_oracle(kind: str, kw: dict, feeds: dict) -> list[np.ndarray]:
    """onnxruntime refuses layout=1: run the same layer with layout=0 on transposed operands."""
    want = _ort(_model(kind, **{**kw, "layout": 0}), {k: v.transpose(1, 0, 2) for k, v in feeds.items()})
    return [w.transpose(2, 0, 1, 3) if w.ndim == 4 else w.transpose(1, 0, 2) for w in want]


def _check(model, feeds, atol=2e-5, want=None) -> rlx.Graph:
    """Import once, compare every output with onnxruntime; return the graph."""
    g, params = rlx.onnx.import_model(model)
    rlx.verify(g)
    want = _ort(model, feeds) if want is None else want
    got = rlx.run(g, feeds, params)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.shape == b.shape
        assert np.abs(b).max() > 1e-3  # not a constant / zero output
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=atol)
    return g


def _scans(g: rlx.Graph) -> int:
    return sum(n.op == "scan" for n in g.nodes)


CASES = [
    ("LSTM", {}),
    ("LSTM", {"direction": "reverse", "peepholes": True}),
    ("LSTM", {"nd": 2, "peepholes": True, "clip": 0.7}),
    ("LSTM", {"nd": 2, "layout": 1}),
    ("LSTM", {"input_forget": 1, "with_bias": False, "with_state": False}),
    ("LSTM", {"seq_lens": True, "activations": ["HardSigmoid", "Tanh", "Softsign"], "activation_alpha": [0.3],
              "activation_beta": [0.4]}),
    ("GRU", {}),
    ("GRU", {"linear_before_reset": 1, "nd": 2, "clip": 0.9}),
    ("GRU", {"direction": "reverse", "layout": 1, "with_state": False}),
    ("RNN", {"nd": 2, "activations": ["Relu", "Tanh"]}),
    ("RNN", {"nd": 2, "activations": ["Tanh", "LeakyRelu"], "activation_alpha": [0.3]}),  # alphas go to who takes one
    ("LSTM", {"nd": 2, "activations": ["Sigmoid", "Tanh", "ScaledTanh", "HardSigmoid", "Affine", "Elu"],
              "activation_alpha": [0.8, 0.25, 0.6, 1.5], "activation_beta": [0.7, 0.45, 0.1]}),
    ("RNN", {"activations": ["LeakyRelu"], "activation_alpha": [0.2], "with_bias": False}),
]


@pytest.mark.parametrize("kind,kw", CASES, ids=[f"{k}-{'-'.join(map(str, v))}" for k, v in CASES])
def test_matches_onnxruntime_as_one_scan_per_direction(kind, kw):
    model = _model(kind, **kw)
    feeds = _feeds(model, {})
    g = _check(model, feeds, want=_batch_major_oracle(kind, kw, feeds) if kw.get("layout") else None)
    assert _scans(g) == kw.get("nd", 1)
    assert len(g.nodes) < 80  # independent of the sequence length (one step in each body)


def test_only_final_states_need_no_trajectory():
    model = _model("LSTM", outputs=("Y_h", "Y_c"))
    g = _check(model, _feeds(model, {}))
    (scan,) = [n for n in g.nodes if n.op == "scan"]
    assert scan.attrs["save_trajectory"] is False and scan.num_results == 2


def test_symbolic_sequence_and_batch_one_import_many_sizes():
    """A sequence length and batch left symbolic: one import runs at several sizes."""
    model = _model("LSTM", nd=2, seq_dim="T", batch_dim="B", peepholes=True)
    g, params = rlx.onnx.import_model(model)
    (x,) = [n for n in g.nodes if n.op == "input" and n.attrs["name"] == "X"]
    assert [str(d) for d in x.shape] == ["T", "B", str(IN)]
    assert {str(n.attrs["length"]) for n in g.nodes if n.op == "scan"} == {"T"}
    for t, b in [(1, 2), (7, 1), (12, 3)]:
        feeds = _feeds(model, {"T": t, "B": b}, seed=t)
        for a, w in zip(rlx.run(g, feeds, params), _ort(model, feeds)):
            np.testing.assert_allclose(a, w, rtol=1e-4, atol=2e-5)


def test_partial_sequence_lens_are_refused():
    model = _model("GRU", seq_lens=True)
    model.graph.initializer[-1].CopyFrom(helper.make_tensor("L", TensorProto.INT32, [BATCH], [SEQ, SEQ - 1, SEQ]))
    with pytest.raises(rlx.onnx.OnnxUnsupported, match="sequence_lens"):
        rlx.onnx.import_model(model)


def test_lstm_gradient_matches_finite_differences():
    """d(sum(Y·Y) + sum(Y_c)) / d(X, W, R) along random directions, in float64."""
    model = _model("LSTM", nd=2, peepholes=True, dtype=TensorProto.DOUBLE)
    y = helper.make_tensor_value_info("loss", TensorProto.DOUBLE, None)
    model.graph.node.extend([helper.make_node("Mul", ["Y", "Y"], ["yy"]), helper.make_node("ReduceSum", ["yy"], ["s1"], keepdims=0),
                             helper.make_node("ReduceSum", ["Y_c"], ["s2"], keepdims=0), helper.make_node("Add", ["s1", "s2"], ["loss"])])
    del model.graph.output[:]
    model.graph.output.append(y)
    g, params = rlx.onnx.import_model(model)
    feeds = _feeds(model, {})
    wrt = ["X", "W", "R"]
    bwd = rlx.grad(g, wrt)
    rlx.verify(bwd)
    grads = rlx.run(bwd, {**feeds, "d_output": np.array(1.0)}, params)
    r = np.random.default_rng(5)
    for _ in range(2):
        d = {k: r.standard_normal((feeds | params)[k].shape) for k in wrt}
        eps = 1e-6

        def loss(s, d=d, eps=eps):
            f = {k: v + s * eps * d[k] if k in d else v for k, v in feeds.items()}
            p = {k: v + s * eps * d[k] if k in d else v for k, v in params.items()}
            return float(rlx.run(g, f, p)[0])

        fd = (loss(1) - loss(-1)) / (2 * eps)
        ad = sum(float(np.sum(gr * d[k])) for gr, k in zip(grads, wrt))
        assert abs(fd) > 1e-3
        np.testing.assert_allclose(ad, fd, rtol=1e-6, atol=1e-8)
