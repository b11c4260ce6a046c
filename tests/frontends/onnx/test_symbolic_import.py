"""ONNX files with dynamic dims import through ``rlx.onnx.import_model`` as ONE graph with symbolic
sizes (``Shape`` / ``Size`` arithmetic folded to dim expressions), checked against onnxruntime at
two input sizes through ``rlx.run``, the compiled numpy backend and the onnxruntime backend."""

from __future__ import annotations

import io
import os
import warnings

import numpy as np
import pytest

import rlx
import rlx.onnx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

RNG = np.random.default_rng(0)


def _feed(sess, shapes):
    feed = {}
    for i, shape in zip(sess.get_inputs(), shapes):
        if "int" in i.type:
            feed[i.name] = RNG.integers(0, 50, shape).astype(np.int64)
        else:
            feed[i.name] = RNG.standard_normal(shape).astype(np.float32)
    return feed


def _check(model_bytes, sizes, backends=("numpy", "onnxruntime"), atol=2e-5):
    """One import, run at every size in ``sizes`` (a list of per-input shapes) vs onnxruntime."""
    g, params = rlx.onnx.import_model(model_bytes)
    sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    exes = {b: rlx.compile(g, backend=b) for b in backends}
    for shapes in sizes:
        feed = _feed(sess, shapes)
        want = sess.run(None, feed)
        for how, got in [("run", rlx.run(g, feed, params)), *((b, e.run(feed, params)) for b, e in exes.items())]:
            assert len(got) == len(want)
            for w, o in zip(want, got):
                o = np.asarray(o)
                assert o.shape == w.shape, (how, shapes)
                np.testing.assert_allclose(o, w, rtol=1e-4, atol=atol, err_msg=f"{how} at {shapes}")
    return g


def _torch_onnx(module, args, dynamic_axes, names, n_out=1):
    torch = pytest.importorskip("torch")
    module.eval()
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, buf, input_names=names, output_names=[f"out{i}" for i in range(n_out)],
                          dynamic_axes=dynamic_axes, opset_version=17, dynamo=False)
    return buf.getvalue()


def test_torch_conv_net_dynamic_batch_and_spatial():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(8)
            self.c2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1)
            self.fc = torch.nn.Linear(8, 4)

        def forward(self, x):
            y = torch.relu(self.bn(self.c1(x)))
            y = F.avg_pool2d(F.max_pool2d(y, 2), 3, stride=1, padding=1, count_include_pad=False)
            y = self.c2(y)
            up = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
            near = F.interpolate(y, scale_factor=3, mode="nearest")
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(up, 1), 1)), up, near

    data = _torch_onnx(Net(), (torch.randn(2, 3, 16, 16),), {"x": {0: "b", 2: "h", 3: "w"}}, ["x"], n_out=3)
    g = _check(data, [[(1, 3, 16, 16)], [(3, 3, 24, 20)]])
    assert [str(d) for d in g.inputs()["x"].shape] == ["b", "3", "h", "w"]


def test_torch_transformer_dynamic_batch_and_sequence():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self, d=32, h=4):
            super().__init__()
            self.h = h
            self.emb = torch.nn.Embedding(50, d)
            self.qkv = torch.nn.Linear(d, 3 * d)
            self.o = torch.nn.Linear(d, d)
            self.ln = torch.nn.LayerNorm(d)
            self.ff = torch.nn.Sequential(torch.nn.Linear(d, 64), torch.nn.GELU(), torch.nn.Linear(64, d))
            self.pos_emb = torch.nn.Embedding(16, d)
            self.register_buffer("pos_ids", torch.arange(16)[None])

        def forward(self, ids):
            b, t = ids.shape
            x = self.emb(ids) + self.pos_emb(self.pos_ids[:, :t]).expand(b, t, -1)  # a buffer sliced to the length
            d = x.shape[-1]
            q, k, v = self.qkv(x).chunk(3, -1)
            q = q.view(b, t, self.h, d // self.h).transpose(1, 2)
            k = k.reshape(b, -1, self.h, d // self.h).transpose(1, 2)
            v = v.view(b, t, self.h, -1).transpose(1, 2)
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = self.ln(x + self.o(a.transpose(1, 2).reshape(b, t, d)))
            pos = torch.arange(t).float()[None, :, None]
            return x + self.ff(x) + pos * 0.01

    data = _torch_onnx(Block(), (torch.randint(0, 50, (2, 7)),), {"x": {0: "b", 1: "s"}}, ["x"])
    g = _check(data, [[(1, 5)], [(3, 9)]])
    # rlx's own export of the symbolic graph computes its sizes at run time: it re-imports as one graph too
    again = rlx.onnx.export(g, rlx.onnx.import_model(data)[1]).SerializeToString()
    _check(again, [[(2, 4)], [(1, 11)]], backends=("numpy",))
    assert g.symbol_ranges["s"] == (1, 16)  # the position buffer bounds the length (onnxruntime fails past it too)
    with pytest.raises(rlx.RlxError, match="s"):
        rlx.run(g, {"x": np.zeros((1, 17), np.int64)}, rlx.onnx.import_model(data)[1])


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString()


def _i64(name, values):
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def test_shape_arithmetic_feeds_reshape_expand_slice_range_and_constant_of_shape():
    """Shape -> Gather / Slice / Mul / Div / Concat -> Reshape, Expand, Slice ends, Range, ConstantOfShape, Tile."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "t", 6])
    outs = [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None) for i in range(5)] + \
        [helper.make_tensor_value_info("r", TensorProto.INT64, None), helper.make_tensor_value_info("sz", TensorProto.INT64, None)]
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
        helper.make_node("Gather", ["s", "i1"], ["t"], axis=0),
        helper.make_node("Mul", ["t", "three"], ["t3"]),
        helper.make_node("Div", ["t3", "three"], ["t_again"]),
        helper.make_node("Concat", ["n", "t_again", "two", "m1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y0"]),                # [n, t, 2, 3]
        helper.make_node("Slice", ["s", "z1", "e2"], ["nt"]),
        helper.make_node("Concat", ["two", "nt", "six"], ["et"], axis=0),
        helper.make_node("Expand", ["x", "et"], ["y1"]),                     # [2, n, t, 6]
        helper.make_node("Sub", ["t", "one"], ["tm1"]),
        helper.make_node("Slice", ["x", "z1", "tm1", "one"], ["y2"]),        # x[:, :t-1]
        helper.make_node("Squeeze", ["t", "z1"], ["t_scalar"]),
        helper.make_node("Range", ["zero_s", "t_scalar", "one_s"], ["r"]),  # arange(t)
        helper.make_node("ConstantOfShape", ["nt"], ["y3"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [2.5])),
        helper.make_node("Tile", ["x", "reps"], ["y4"]),
        helper.make_node("Size", ["x"], ["sz"]),
    ]
    inits = [_i64("i0", [0]), _i64("i1", [1]), _i64("three", [3]), _i64("two", [2]), _i64("m1", [-1]), _i64("z1", [0]),
             _i64("e2", [2]), _i64("one", [1]), _i64("six", [6]), _i64("reps", [2, 1, 3]),
             helper.make_tensor("zero_s", TensorProto.INT64, [], [0]), helper.make_tensor("one_s", TensorProto.INT64, [], [1])]
    data = _model(nodes, [x], outs, inits)
    g = _check(data, [[(2, 5, 6)], [(3, 1, 6)]])
    assert not g.outputs[0].shape.is_static


def test_minus_one_dims_and_flatten_on_symbolic_dims():
    """dim_value -1 on inputs (as some non-torch exporters write "unknown") becomes a fresh symbol; a
    declared -1 output dim is accepted; Flatten multiplies symbolic dims."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, -1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, -1])
    data = _model([helper.make_node("Flatten", ["x"], ["f"], axis=2), helper.make_node("Relu", ["f"], ["y"])], [x], [y])
    g = _check(data, [[(2, 3, 4)], [(5, 3, 1)]])
    assert all(not isinstance(d, int) for d in g.inputs()["x"].shape[::2])


def test_pad_computed_from_initializers_is_folded():
    """Pads computed from a float initializer (a param for rlx) are evaluated at import, not refused."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Cast", ["pf"], ["pi"], to=TensorProto.INT64),
             helper.make_node("Add", ["pi", "extra"], ["pads"]),
             helper.make_node("Pad", ["x", "pads"], ["y"], mode="constant")]
    inits = [helper.make_tensor("pf", TensorProto.FLOAT, [6], [0, 1, 2, 0, 0, 1]), _i64("extra", [0, 0, 0, 0, 1, 0])]
    _check(_model(nodes, [x], [y], inits), [[(2, 3, 5)], [(1, 3, 5)]])


def test_value_dependent_shapes_still_need_import_runnable():
    """A Reshape whose target is a graph input's VALUE cannot be one graph: NeedsStatic names the input."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    s = helper.make_tensor_value_info("s", TensorProto.INT64, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    data = _model([helper.make_node("Reshape", ["x", "s"], ["y"])], [x, s], [y])
    with pytest.raises(rlx.onnx.OnnxUnsupported, match="'s'"):
        rlx.onnx.import_model(data)


def _f32(name, shape, seed):
    arr = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return helper.make_tensor(name, TensorProto.FLOAT, list(shape), arr.reshape(-1).tolist())


@pytest.mark.parametrize("op", ["ConvSameStride2", "MaxPoolSameStride2", "AveragePoolSameStride2", "ConvTranspose",
                                "DepthToSpace", "Softmax11", "GroupNormalization", "Dropout",
                                "AveragePoolPads", "MaxPoolSame", "Trilu"])
def test_converters_on_symbolic_batch_and_spatial_sizes(op):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits, opset = [], 21 if op == "GroupNormalization" else 17
    if op == "ConvSameStride2":  # pads depend on the size modulo the stride: dim expressions
        node = helper.make_node("Conv", ["x", "wc"], ["y"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")
        inits = [_f32("wc", (5, 4, 3, 3), 4)]
    elif op == "MaxPoolSameStride2":
        node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 2], auto_pad="SAME_LOWER")
    elif op == "AveragePoolSameStride2":
        node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")
    elif op == "ConvTranspose":
        node = helper.make_node(op, ["x", "wt"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])
        inits = [_f32("wt", (4, 3, 3, 3), 1)]
    elif op == "DepthToSpace":
        node = helper.make_node(op, ["x"], ["y"], blocksize=2, mode="CRD")
    elif op == "Softmax11":
        node, opset = helper.make_node("Softmax", ["x"], ["y"], axis=2), 11
    elif op == "GroupNormalization":
        node = helper.make_node(op, ["x", "s", "b"], ["y"], num_groups=2)
        inits = [_f32("s", (4,), 2), _f32("b", (4,), 3)]
    elif op == "Dropout":
        node = helper.make_node(op, ["x"], ["y", "mask"])
    elif op == "AveragePoolPads":
        node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 2], pads=[1, 0, 0, 1], strides=[2, 1])
    elif op == "MaxPoolSame":
        node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], auto_pad="SAME_UPPER")
    else:
        node = helper.make_node(op, ["x", "k"], ["y"], upper=0)
        inits = [helper.make_tensor("k", TensorProto.INT64, [], [1])]
    _check(_model([node], [x], [y], inits, opset=opset), [[(1, 4, 5, 6)], [(3, 4, 2, 7)]])


@pytest.mark.slow
def test_torch_dynamo_export_with_interpolate_to_the_input_size():
    """torch.onnx.export(dynamo=True) spells sizes its own way (Shape start / end, SymInt arithmetic);
    ``interpolate(size=x.shape[-2:])`` after a stride-2 conv needs the run-time coordinate Resize."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    F = torch.nn.functional
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.c2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1)

        def forward(self, x):
            y = self.c2(F.max_pool2d(torch.relu(self.c1(x)), 2))
            return F.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)

    dim = torch.export.Dim
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onx = torch.onnx.export(Net().eval(), (torch.randn(2, 3, 16, 16),), input_names=["x"], dynamo=True, opset_version=18,
                                dynamic_shapes={"x": {0: dim("b", min=1, max=64), 2: dim("h", min=4, max=512),
                                                      3: dim("w", min=4, max=512)}}, verbose=False)
    _check(onx.model_proto.SerializeToString(), [[(1, 3, 16, 16)], [(2, 3, 20, 12)]])


def test_pad_to_a_multiple_computed_from_the_shape():
    """pads = (8 - h % 8) % 8 after the last axis: a dim expression, one graph for every size."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=2),
             helper.make_node("Mod", ["s", "eight"], ["r"]), helper.make_node("Sub", ["eight", "r"], ["t"]),
             helper.make_node("Mod", ["t", "eight"], ["after"]),
             helper.make_node("Concat", ["zeros", "after"], ["pads"], axis=0),
             helper.make_node("Pad", ["x", "pads", "fill"], ["y"])]
    inits = [_i64("eight", [8]), _i64("zeros", [0, 0, 0, 0, 0]), helper.make_tensor("fill", TensorProto.FLOAT, [], [1.5])]
    _check(_model(nodes, [x], [y], inits, opset=18), [[(1, 3, 5)], [(2, 3, 16)], [(1, 3, 9)]])


def test_exporter_idioms_fold_to_dims():
    """torch's expand(-1) idiom (Where(Equal(shape, -1), 1, shape)), a float scale applied to a Cast shape
    (Floor(Cast(Shape) * 2.0)), variadic Max and integer Div all fold to dims: one graph, no runtime shapes."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, "h", "w"])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y0", "y1", "y2")]
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Slice", ["s", "z1", "one"], ["s_head"]),
        helper.make_node("Slice", ["s", "two", "four"], ["s_tail"]),
        helper.make_node("Concat", ["s_head", "c3", "s_tail"], ["target"], axis=0),
        helper.make_node("Shape", ["target"], ["tlen"]),
        helper.make_node("ConstantOfShape", ["tlen"], ["ones"], value=helper.make_tensor("v", TensorProto.INT64, [1], [1])),
        helper.make_node("Mul", ["ones", "m1"], ["m1s"]),
        helper.make_node("Equal", ["target", "m1s"], ["is_m1"]),
        helper.make_node("Where", ["is_m1", "ones", "target"], ["shape"]),
        helper.make_node("Expand", ["x", "shape"], ["y0"]),                          # [n, 3, h, w]
        helper.make_node("Cast", ["s_tail"], ["hw_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["hw_f", "two_f"], ["hw2_f"]),
        helper.make_node("Floor", ["hw2_f"], ["hw2_floor"]),
        helper.make_node("Cast", ["hw2_floor"], ["hw2"], to=TensorProto.INT64),
        helper.make_node("Concat", ["s_head", "one", "hw2"], ["sizes"], axis=0),
        helper.make_node("Resize", ["x", "", "", "sizes"], ["y1"], mode="nearest"),   # [n, 1, 2h, 2w]
        helper.make_node("Max", ["s_tail", "three", "s_tail"], ["big"]),
        helper.make_node("Div", ["big", "two"], ["half"]),
        helper.make_node("Concat", ["s_head", "one", "half"], ["crop"], axis=0),
        helper.make_node("Slice", ["x", "z4", "crop", "ax4"], ["y2"]),               # x[:, :, :max(h,3)//2, :max(w,3)//2]
    ]
    inits = [_i64("z1", [0]), _i64("one", [1]), _i64("two", [2]), _i64("four", [4]), _i64("c3", [3]), _i64("m1", [-1]),
             _i64("three", [3]), _i64("z4", [0, 0, 0, 0]), _i64("ax4", [0, 1, 2, 3]),
             helper.make_tensor("two_f", TensorProto.FLOAT, [1], [2.0])]
    g = _check(_model(nodes, [x], outs, inits, opset=13), [[(1, 1, 4, 6)], [(2, 1, 7, 2)]])
    assert all(not t.shape.is_static for t in (v.node.type for v in g.outputs))
    assert [str(d) for d in g.outputs[1].shape] == ["n", "1", "2*h", "2*w"]


def test_sizes_used_as_numbers():
    """A size used in arithmetic (a mean as ReduceSum / Size, a scale from Shape) is computed at run time."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "t", 3])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("mean", "scaled")]
    nodes = [helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
             helper.make_node("Size", ["x"], ["size"]),
             helper.make_node("Cast", ["size"], ["size_f"], to=TensorProto.FLOAT),
             helper.make_node("Div", ["total", "size_f"], ["mean"]),
             helper.make_node("Shape", ["x"], ["s"], start=1, end=2),
             helper.make_node("Cast", ["s"], ["t_f"], to=TensorProto.FLOAT),
             helper.make_node("Sqrt", ["t_f"], ["root"]),
             helper.make_node("Div", ["x", "root"], ["scaled"])]
    _check(_model(nodes, [x], outs, opset=18), [[(2, 5, 3)], [(4, 1, 3)]])


def test_speech_encoder_front_end_imports_as_one_graph():
    """wav2vec2 / SEW-shaped: a strided conv stack over raw audio, a positional conv cropped by ``[:-1]`` and added
    back, a reshape to heads by -1, a mask of half the frames (Div of a size into ConstantOfShape) and a learned
    probe repeated over the batch (Tile by a size). The conv stack's length is negative for short audio, so its
    symbol's range is narrowed to where it is a size; then the crop's clamp folds away and every shape is proven:
    one graph for every length, checked against onnxruntime; shorter audio is refused with a typed error."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class Front(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList([torch.nn.Conv1d(1, 8, 10, 5), torch.nn.Conv1d(8, 8, 3, 2),
                                              torch.nn.Conv1d(8, 8, 2, 2)])
            self.pos = torch.nn.Conv1d(8, 8, 4, padding=2, groups=2)
            self.probe = torch.nn.Parameter(torch.randn(1, 1, 8))
            self.q = torch.nn.Linear(8, 8)

        def forward(self, wav):
            x = wav[:, None]
            for conv in self.convs:
                x = torch.nn.functional.gelu(conv(x))
            x = x + torch.nn.functional.gelu(self.pos(x)[:, :, :-1])
            x = x.transpose(1, 2)
            b, n, _ = x.shape
            heads = self.q(x).reshape(b, n, -1, 4)
            mask = torch.ones(b, n // 2) * 0.5
            return torch.cat([self.probe.repeat(b, 1, 1), x], 1), heads, mask

    data = _torch_onnx(Front(), (torch.randn(2, 400),), {"wav": {0: "b", 1: "t"}}, ["wav"], n_out=3)
    g = _check(data, [[(1, 400)], [(3, 1237)], [(2, 50)]])
    assert [str(d) for d in g.inputs()["wav"].shape] == ["b", "t"]
    lo = g.symbol_ranges["t"][0]
    assert 1 < lo <= 50  # the stack's length is >= 0 from t = lo on: the least length whose frames are a size
    params = rlx.onnx.import_model(data)[1]
    with pytest.raises(rlx.FeedError, match=r"'t' = .* outside its range"):
        rlx.run(g, {"wav": np.zeros((1, lo - 1), np.float32)}, params)
    with pytest.raises(rlx.ShapeError, match="not positive"):  # in range, but a conv's window outgrows its input
        rlx.run(g, {"wav": np.zeros((1, lo), np.float32)}, params)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.InvalidArgument):  # onnxruntime refuses that length too
        sess.run(None, {"wav": np.zeros((1, lo), np.float32)})


def test_a_deep_strided_conv_chain_narrows_its_length_in_bounded_work():
    """Each strided conv halves the length, so the least length whose output is a size doubles per stride: found
    by doubling and bisection (O(log size) evaluations per size expression), and given up past 2**62. Imported in
    a child process under 2 GiB and 30 s of CPU: 20 convs (10 strided) need t >= 1023 (stride-1 convs take one
    sample each, strided ones halve: the least length is 2**10 - 1); 400 convs narrow it until the next start
    would pass 2**62, then make no further claim."""
    from security.isolate import run_cases

    cases = os.path.join(os.path.dirname(__file__), "symbolic_cases.py")
    short, deep = run_cases(cases, "conv_chain_range", [[20], [400]], memory=2 << 30, cpu=30)
    assert short.exited and short.error is None and short.value == 1023, (short.how, short.message)
    assert deep.exited and deep.error is None and 2**61 <= deep.value <= 2**62, (deep.how, deep.message, deep.value)
