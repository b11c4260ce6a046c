"""The Graph builder methods are visible to IDEs and type checkers: src/rlx/ir/_builders.pyi declares
one method per registry builder (checked against the registry), with the op's operands."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

import rlx
from rlx.ir.builder_stubs import builder_signature, is_generated, operand_counts, render_builder_stubs
from rlx.ir.opdef import VARIADIC, builder_methods, get_op

STUB = Path(rlx.__file__).resolve().parent / "ir" / "_builders.pyi"


def _declared() -> dict[str, ast.FunctionDef]:
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GraphBuilders")
    return {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}


def _builtin(op) -> bool:
    return op.infer.__module__.startswith("rlx.") and op.family not in ("test", "custom")


def test_stub_is_current():
    assert STUB.read_text(encoding="utf-8") == render_builder_stubs(rlx.Graph.__dict__), "run: python scripts/gen_builder_stubs.py"


def test_every_builder_is_declared_with_its_operands():
    declared = _declared()
    for method, (op_name, preset) in builder_methods().items():
        op = get_op(op_name)
        if not _builtin(op) or not is_generated(rlx.Graph.__dict__.get(method)):
            continue
        fn = declared.get(method)
        assert fn is not None, f"builder {method!r} ({op_name}) is missing from {STUB.name}"
        operands = [a.arg for a in fn.args.posonlyargs][1:]
        if op.arity == VARIADIC:
            assert len(operands) == 1, method
        elif operand_counts(op, preset)[1] is None:  # groups sized by attributes: *operands
            assert not operands and fn.args.vararg is not None, method
        elif not callable(op.arity):
            assert len(operands) == op.arity, (method, operands)
        keywords = {a.arg for a in [*fn.args.args, *fn.args.kwonlyargs]}
        assert keywords == {k for k in op.attrs if k not in preset} | {"name"}, method
    assert set(declared) <= set(builder_methods()), "stub declares builders the registry does not have"


def test_real_methods_are_not_shadowed_and_graph_derives_from_the_stub_class():
    declared = _declared()
    for name in ("input", "param", "constant", "scalar", "set_outputs"):
        assert name not in declared
    assert "GraphBuilders" in Path(rlx.ir.graph.__file__).read_text(encoding="utf-8")


def test_multi_result_builders_return_tuples():
    """The stub's return types match what the builders return (docs/multi_result.md)."""
    g = rlx.Graph("multi")
    x = g.input("x", (4, 6))
    assert isinstance(g.split(x, axis=1, sizes=[2, 4]), tuple) and isinstance(g.split(x, axis=1, sizes=[6]), tuple)
    assert isinstance(g.top_k(x, k=2, output="both"), tuple) and isinstance(g.top_k(x, k=2), rlx.Value)
    gamma, beta = g.param("g", (6,)), g.param("b", (6,))
    assert isinstance(g.fused_residual_layer_norm(x, x, gamma, beta, with_sum=True), tuple)
    assert isinstance(g.fused_residual_rms_norm(x, x, gamma, beta), rlx.Value)
    assert isinstance(g.max_pool2d_with_indices(g.input("im", (1, 1, 4, 4)), kernel_size=[2, 2]), tuple)
    body = rlx.Graph("body")
    c, r = body.input("c", (6,)), body.input("r", (6,))
    body.set_outputs([c + r])
    assert isinstance(g.scan(g.input("z", (6,)), x, body=body, length=4, num_xs=1), rlx.Value)  # one carry: one result
    two = rlx.Graph("two")
    c1, c2, r2 = two.input("c1", (6,)), two.input("c2", (6,)), two.input("r", (6,))
    two.set_outputs([c1 + r2, c2 * r2])
    z = g.input("z2", (6,))
    assert isinstance(g.scan(z, z, x, body=two, length=4, num_carries=2, num_xs=1), tuple)
    stub = STUB.read_text(encoding="utf-8")
    assert "def matmul(self, a: Operand, b: Operand, /, name: str | None = None) -> Value:" in stub
    assert "def split(" in stub and "-> tuple[Value, ...]:" in stub.split("def split(")[1].split("\n")[0]


def test_dir_and_help_show_the_builders():
    import inspect
    import pydoc

    g = rlx.Graph("g")
    names = dir(g)
    assert {"matmul", "gelu", "top_k", "input", "set_outputs"} <= set(names)
    sig = inspect.signature(g.matmul)
    assert list(sig.parameters) == ["a", "b", "name"] and sig.return_annotation == "Value"
    assert str(inspect.signature(g.top_k).parameters["output"].annotation) == "Literal['indices', 'values', 'both']"
    text = pydoc.render_doc(g.layer_norm, renderer=pydoc.plaintext)
    assert "layer_norm(x: 'Operand', gamma: 'Operand', beta: 'Operand'" in text and "Attributes:" in text
    assert get_op("layer_norm").doc.split(".")[0] in text


def test_the_class_knows_the_builders_too():
    import inspect

    assert "matmul" in dir(rlx.Graph) and inspect.signature(rlx.Graph.matmul).return_annotation == "Value"
    assert not hasattr(rlx.Graph, "matmull") and not hasattr(rlx.Graph("g"), "matmull")


def test_operand_counts_follow_the_attributes():
    """Optional operands (attention's mask, a scheme without scales) and groups sized by attributes
    (scan's inits / bcasts / xs) are stated as such: the counts the op docs give."""
    expected = {"attention": (3, 4), "gated_delta_net": (5, 6), "fused_transformer_layer": (10, 14),
                "dequant_matmul": (2, 4), "fused_attention_block": (4, 8), "matmul": (2, 2),
                "scan": (0, None), "elementwise_region": (0, None), "concat": (1, None)}
    for op, counts in expected.items():
        assert operand_counts(get_op(op)) == counts, op
    sig = builder_signature("scan")
    assert [p.kind.name for p in sig.parameters.values()][:2] == ["POSITIONAL_ONLY", "VAR_POSITIONAL"]
    assert sig.parameters["body"].kind.name == "KEYWORD_ONLY"
    stub = STUB.read_text(encoding="utf-8")
    assert "def scan(self, /, *operands: Operand, body: Graph" in stub
    assert "def dequant_matmul(self, x: Operand, w_q: Operand, scale: Operand = ..., zp: Operand = ..., /" in stub


def test_a_scan_with_several_xs_builds_as_its_stub_says():
    """The builder takes what the stub states: any number of operands for scan's groups."""
    g = rlx.Graph("g")
    body = rlx.Graph("body")
    c, a, b = body.input("c", (3,)), body.input("a", (3,)), body.input("b", (3,))
    body.set_outputs([c * a + b])
    xs = [g.input("xa", (4, 3)), g.input("xb", (4, 3))]
    init = g.input("c0", (3,))
    out = g.scan(init, *xs, body=body, length=4, num_xs=2)
    g.set_outputs([out])
    feeds = {"c0": np.ones(3, np.float32), "xa": np.full((4, 3), 2, np.float32), "xb": np.arange(12, dtype=np.float32).reshape(4, 3)}
    want = feeds["c0"]
    for t in range(4):
        want = want * feeds["xa"][t] + feeds["xb"][t]
    np.testing.assert_allclose(rlx.run(g, feeds)[0], want)
