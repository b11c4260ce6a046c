"""Type-checked by tests/typing/test_mypy_rejects.py, never run: each line marked ``# error:``
must be a mypy error (a misspelt op, a wrong attribute type, a value outside an attribute's
choices, a multi-result builder used as one Value)."""

import rlx

g = rlx.Graph("bad")
x = g.input("x", (2, 8))
y = g.matmull(x, x)  # error: "Graph" has no attribute "matmull"
z = g.top_k(x, k="two")  # error: No overload variant of "top_k"
w = g.top_k(x, k=2, output="bogus")  # error: No overload variant of "top_k"
v = g.activation(x, kind="gelu_tanhh")  # error: Argument "kind" to "activation" of "GraphBuilders" has incompatible type
u = g.cast(x, to=3)  # error: Argument "to" to "cast" of "GraphBuilders" has incompatible type
parts: rlx.Value = g.split(x, axis=1, sizes=[4, 4])  # error: Incompatible types in assignment
