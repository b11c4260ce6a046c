"""Autodiff through complex (c64) values, in JAX's convention (rlx.autodiff.rules).

Each loss below is written once against a tiny op namespace and built twice: as an rlx graph
and as a JAX function (complex64 / float32, like rlx's c64). Gradients, JVPs and HVPs are
compared with ``jax.grad`` / ``jax.jvp``, and gradients with central differences of
``rlx.run`` (float64 real inputs; moderate tolerances, as the complex part runs in c64). The
finite differences also check the convention on their own: for a complex leaf ``z`` the
change of the loss along ``dz`` is ``Re(sum(grad_z · dz))``.
"""

from __future__ import annotations

import numpy as np
import pytest

import rlx

jax = pytest.importorskip("jax")
jnp = jax.numpy

SHAPE = (2, 4)
H = np.array([[1 - 0.5j, 0.3j, 2.0, -1 + 1j], [0.5, 1j, -0.2 + 0.1j, 1.5]], np.complex64)  # a spectral filter


class RlxOps:
    """The loss vocabulary as rlx graph builders."""

    def __init__(self, g: rlx.Graph):
        self.g = g

    def to_complex(self, v):
        return self.g.cast(v, to="c64")

    def real(self, v):
        return self.g.cast(v, to="f32")

    def const(self, a):
        return self.g.constant(a)

    def fft(self, v, inverse=False, norm="backward", axis=-1):
        return self.g.fft(v, inverse=inverse, norm=norm, axis=axis)

    def conj(self, v):
        return self.g.conjugate(v)

    def norm_sq(self, v):
        return self.g.complex_norm_sq(v)

    def exp(self, v):
        return self.g.exp(v)

    def log(self, v):
        return self.g.log(v)

    def sqrt(self, v):
        return self.g.sqrt(v)

    def reduce(self, op, v, axes=None):
        return self.g.reduce(v, op=op, axes=axes, keep_dim=False)

    def reshape(self, v, shape):
        return self.g.reshape(v, new_shape=list(shape))

    def transpose(self, v, perm):
        return self.g.transpose(v, perm=list(perm))

    def narrow(self, v, axis, start, length):
        return self.g.narrow(v, axis, start, length)

    def concat(self, parts, axis):
        return self.g.concat(parts, axis=axis)

    def expand(self, v, shape):
        return self.g.expand(v, target_shape=list(shape))

    def gather(self, v, idx, axis):
        return self.g.gather(v, self.g.constant(np.array(idx, np.int64)), axis=axis)

    def where(self, mask, a, b):
        return self.g.where(self.g.constant(mask), a, b)

    def matmul(self, a, b):
        return self.g.matmul(a, b)


class JaxOps:
    """The same vocabulary in jax.numpy."""

    to_complex = staticmethod(lambda v: v.astype(jnp.complex64))
    real = staticmethod(jnp.real)
    const = staticmethod(jnp.asarray)
    conj = staticmethod(jnp.conj)
    norm_sq = staticmethod(lambda v: jnp.real(v * jnp.conj(v)))
    exp, log, sqrt = staticmethod(jnp.exp), staticmethod(jnp.log), staticmethod(jnp.sqrt)
    reshape, transpose, where = staticmethod(jnp.reshape), staticmethod(jnp.transpose), staticmethod(jnp.where)
    concat = staticmethod(lambda parts, axis: jnp.concatenate(parts, axis=axis))
    expand = staticmethod(jnp.broadcast_to)
    matmul = staticmethod(jnp.matmul)

    @staticmethod
    def fft(v, inverse=False, norm="backward", axis=-1):
        return (jnp.fft.ifft if inverse else jnp.fft.fft)(v, norm=norm, axis=axis)

    @staticmethod
    def reduce(op, v, axes=None):
        return getattr(jnp, op)(v, axis=None if axes is None else tuple(axes))

    @staticmethod
    def narrow(v, axis, start, length):
        return jax.lax.slice_in_dim(v, start, start + length, axis=axis)

    @staticmethod
    def gather(v, idx, axis):
        return jnp.take(v, jnp.array(idx), axis=axis)


# Each loss: (ops, x real [2, 4], z c64 [2, 4]) -> a real scalar.
def spectral_energy(o, x, z):
    return o.reduce("sum", o.norm_sq(o.fft(o.to_complex(x)))) + o.reduce("sum", o.norm_sq(o.fft(z, axis=0, norm="ortho")))


def filtered_roundtrip(o, x, z):
    """Filter in frequency space, back to real with the inverse fft and the real part."""
    y = o.real(o.fft(o.fft(o.to_complex(x)) * o.const(H), inverse=True))
    w = o.real(o.fft(z * o.const(H), inverse=True, norm="forward"))
    return o.reduce("sum", y * y) + o.reduce("sum", w * x)


def arithmetic(o, x, z):
    c = o.to_complex(x)
    a = c * z - z / (c + 3.0) + (-z) * o.conj(z) - (c - (0.5 + 1j))
    return o.reduce("sum", o.norm_sq(a)) + o.reduce("sum", o.real(a * (1 - 2j)))


def holomorphic(o, x, z):
    u = o.exp(z * 0.5) + o.log(z) * o.sqrt(z) + o.sqrt(o.to_complex(x) + 4.0)
    return o.reduce("sum", o.real(u)) + o.reduce("sum", o.norm_sq(u)) * 0.1


def shapes(o, x, z):
    """narrow / reshape / transpose / concat / expand / gather / where on c64 values."""
    left = o.narrow(z, 1, 1, 2)  # [2, 2]
    right = o.transpose(o.reshape(o.to_complex(x), (4, 2)), (1, 0))  # [2, 4]
    cat = o.concat([left, right], 1)  # [2, 6]
    col = o.expand(o.reshape(o.reduce("sum", z, [1]), (2, 1)), (2, 6))
    rows = o.gather(cat + col * (0.5j), [1, 0, 1], 0)  # [3, 6]
    mask = np.array([[True, False, True, True, False, True]])
    picked = o.where(mask, rows, o.conj(rows) * 2.0)
    return o.reduce("sum", o.norm_sq(picked)) + o.reduce("sum", o.real(picked))


def reductions(o, x, z):
    s = o.reduce("prod", z, [1]) + o.reduce("mean", o.to_complex(x) * z, [1])  # [2]
    return o.reduce("sum", o.norm_sq(s)) + o.real(o.reduce("sum", s * (2 - 1j)))


def linear_algebra(o, x, z):
    """Complex matmuls: z·xᵀ and a filter applied from the right."""
    m = o.matmul(z, o.transpose(o.to_complex(x), (1, 0)))  # [2, 2]
    f = o.matmul(m, z * o.const(H))  # [2, 4]
    return o.reduce("sum", o.norm_sq(f)) * 0.1 + o.reduce("sum", o.real(m * (1 + 1j)))


LOSSES = [spectral_energy, filtered_roundtrip, arithmetic, holomorphic, shapes, reductions, linear_algebra]


def build(loss, x_dtype="f32") -> rlx.Graph:
    g = rlx.Graph(loss.__name__)
    out = loss(RlxOps(g), g.input("x", SHAPE, x_dtype), g.input("z", SHAPE, "c64"))
    g.set_outputs([g.cast(out, to=x_dtype)])
    return g


def jax_loss(loss):
    return lambda x, z: loss(JaxOps, x, z)


def data(seed=0):
    """x real; z off the negative real axis (log and sqrt are holomorphic there)."""
    r = np.random.default_rng(seed)
    x = r.standard_normal(SHAPE).astype(np.float32)
    z = (1.5 + 0.3 * r.standard_normal(SHAPE) + 0.5j * r.standard_normal(SHAPE)).astype(np.complex64)
    return x, z


def close(got, want, rtol=2e-4):
    want = np.asarray(want)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(1.0, float(np.abs(want).max())))


# ------------------------------------------------------------------------------ convention
def test_convention_is_jax_grad():
    g = rlx.Graph("abs2")
    z = g.input("z", (), "c64")
    g.set_outputs([g.complex_norm_sq(z)])
    (gz,) = rlx.run(rlx.grad(g, ["z"]), {"z": np.complex64(3 + 4j), "d_output": np.float32(1)})
    assert gz.dtype == np.complex64
    assert gz == 6 - 8j == complex(jax.grad(lambda z: jnp.abs(z) ** 2)(3 + 4j))
    h = rlx.Graph("re_z2")  # L = Re f(z) with f holomorphic: the gradient is f'(z) itself, here 2z
    z = h.input("z", (), "c64")
    h.set_outputs([h.cast(z * z, to="f32")])
    (gz,) = rlx.run(rlx.grad(h, ["z"]), {"z": np.complex64(3 + 4j), "d_output": np.float32(1)})
    assert gz == 6 + 8j == complex(jax.grad(lambda z: jnp.real(z * z))(3 + 4j))


# ------------------------------------------------------------------------------ against jax
@pytest.mark.parametrize("loss", LOSSES, ids=lambda f: f.__name__)
def test_grad_matches_jax(loss):
    x, z = data()
    bwd = rlx.grad_with_loss(build(loss), ["x", "z"])
    rlx.verify(bwd)
    value, gx, gz = rlx.run(bwd, {"x": x, "z": z, "d_output": np.float32(1)})
    assert gx.dtype == np.float32 and gz.dtype == np.complex64
    want = jax.value_and_grad(jax_loss(loss), argnums=(0, 1))(x, z)
    close(value, want[0])
    close(gx, want[1][0])
    close(gz, want[1][1])


@pytest.mark.parametrize("loss", LOSSES, ids=lambda f: f.__name__)
def test_jvp_matches_jax(loss):
    x, z = data()
    tx, tz = data(1)
    tz = tz - 1.5  # any direction
    value, tangent = rlx.run(rlx.jvp(build(loss), ["x", "z"]), {"x": x, "z": z, "t_x": tx, "t_z": tz})
    want = jax.jvp(jax_loss(loss), (x, z), (tx, tz))
    close(value, want[0])
    close(tangent, want[1])


@pytest.mark.parametrize("loss", LOSSES, ids=lambda f: f.__name__)
def test_hvp_matches_jax_forward_over_reverse(loss):
    x, z = data()
    tx, tz = data(2)
    outs = rlx.run(rlx.hvp(build(loss), ["x", "z"]), {"x": x, "z": z, "d_output": np.float32(1), "t_x": tx, "t_z": tz})
    _, (hx, hz) = jax.jvp(jax.grad(jax_loss(loss), argnums=(0, 1)), (x, z), (tx, tz))
    close(outs[-2], hx, rtol=1e-3)
    close(outs[-1], hz, rtol=1e-3)


def test_complex_outputs_of_jvp_match_jax():
    g = rlx.Graph("c_out")
    z = g.input("z", (5,), "c64")
    g.set_outputs([g.fft(g.conjugate(z) * z * (1 + 1j), inverse=True)])
    r = np.random.default_rng(3)
    z0, t0 = (r.standard_normal((2, 5)) + 1j * r.standard_normal((2, 5))).astype(np.complex64)
    out, tangent = rlx.run(rlx.jvp(g, ["z"]), {"z": z0, "t_z": t0})
    assert tangent.dtype == np.complex64
    want = jax.jvp(lambda z: jnp.fft.ifft(jnp.conj(z) * z * (1 + 1j)), (z0,), (t0,))
    close(out, want[0])
    close(tangent, want[1])


# ------------------------------------------------------------------------- finite differences
@pytest.mark.parametrize("loss", LOSSES, ids=lambda f: f.__name__)
def test_grad_matches_finite_differences(loss):
    g = build(loss, "f64")
    x, z = data()
    x = x.astype(np.float64)
    gx, gz = rlx.run(rlx.grad(g, ["x", "z"]), {"x": x, "z": z, "d_output": np.float64(1)})
    r = np.random.default_rng(4)
    eps = 1e-2  # c64 rounds like f32: a larger step keeps the rounding noise below the tolerance

    def slope(dx, dz):
        def at(s):
            return rlx.run(g, {"x": x + s * dx, "z": (z + s * dz).astype(np.complex64)})[0]
        return (at(eps) - at(-eps)) / (2 * eps)

    for _ in range(2):
        dx = r.standard_normal(SHAPE)
        dz = r.standard_normal(SHAPE) + 1j * r.standard_normal(SHAPE)
        np.testing.assert_allclose(np.sum(gx * dx), slope(dx, 0), rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(np.real(np.sum(gz * dz)), slope(0, dz), rtol=1e-3, atol=1e-4)


# ------------------------------------------------------------------------------ training
def test_spectral_loss_training_lowers_the_loss():
    """Fit a real signal to a target power spectrum with compile_training (Adam)."""
    n = 16
    t = np.arange(n)
    target = np.abs(np.fft.fft(np.sin(2 * np.pi * 3 * t / n) + 0.5 * np.cos(2 * np.pi * 5 * t / n))) ** 2
    g = rlx.Graph("spectral_fit")
    w = g.param("w", (n,), "f32")
    d = g.complex_norm_sq(g.fft(g.cast(w, to="c64"), norm="ortho")) - g.constant(target.astype(np.float32) / n)
    g.set_outputs([g.mean(d * d)])
    init = {"w": np.random.default_rng(5).standard_normal(n).astype(np.float32)}
    trainer = rlx.compile_training(g, optimizer="adam", lr=5e-2, params=init)
    first = trainer.loss({})
    losses = [trainer.step({}) for _ in range(60)]
    assert losses[-1] < 0.1 * first
    assert all(np.isfinite(losses))


def test_complex_leaf_descends_along_the_conjugate_gradient():
    """With JAX's convention a step downhill on a complex leaf is z -= lr·conj(grad)."""
    r = np.random.default_rng(6)
    target = (r.standard_normal(8) + 1j * r.standard_normal(8)).astype(np.complex64)
    g = rlx.Graph("phase_fit")
    z = g.input("z", (8,), "c64")
    g.set_outputs([g.sum(g.complex_norm_sq(g.fft(z, norm="ortho") - g.constant(target)))])
    bwd = rlx.grad_with_loss(g, ["z"])
    zv = np.zeros(8, np.complex64)
    losses = []
    for _ in range(20):
        loss, gz = rlx.run(bwd, {"z": zv, "d_output": np.float32(1)})
        losses.append(float(loss))
        zv = (zv - 0.25 * np.conj(gz)).astype(np.complex64)
    assert losses[-1] < 1e-6 * losses[0]
    np.testing.assert_allclose(np.fft.fft(zv, norm="ortho"), target, atol=1e-4)


# ------------------------------------------------------------------------------ refusals
def _refuses(g: rlx.Graph, wrt, match: str) -> None:
    for transform in (rlx.grad, rlx.jvp):
        with pytest.raises(rlx.AutodiffError, match=match):
            transform(g, wrt)


def test_ops_without_complex_rules_are_refused_by_name():
    for op, build_z in (("softmax", lambda g, c: g.softmax(c)), ("cumulative", lambda g, c: g.cumsum(c))):
        g = rlx.Graph(op)
        x = g.input("x", (4,), "f32")
        g.set_outputs([g.sum(g.complex_norm_sq(build_z(g, g.cast(x, to="c64"))))])
        _refuses(g, ["x"], rf"op '{op}'.*complex")


def test_complex_constant_into_a_real_only_rule_is_refused():
    """A real active operand next to a complex constant still needs the op's complex rules."""
    g = rlx.Graph("cc")
    x = g.input("x", (4,), "f32")
    c = g.constant(np.full(4, 1 + 1j, np.complex64))
    g.set_outputs([g.sum(g.complex_norm_sq(g.cumsum(c * g.cast(x, to="c64"))))])
    _refuses(g, ["x"], "op 'cumulative'")


def test_second_order_through_an_op_without_complex_rules_is_refused():
    """cumsum's rules are real-only: a complex value through it is refused, naming the op."""
    g = rlx.Graph("cum")
    z = g.input("z", (4,), "c64")
    g.set_outputs([g.sum(g.complex_norm_sq(g.cumsum(z, axis=0)))])
    with pytest.raises(rlx.AutodiffError, match="op 'cumulative'"):
        rlx.grad(g, ["z"])


def test_complex_loss_is_refused():
    g = rlx.Graph("closs")
    z = g.input("z", (3,), "c64")
    g.set_outputs([g.sum(z * z)])
    with pytest.raises(rlx.AutodiffError, match=r"loss .* real float"):
        rlx.grad(g, ["z"])
    jv = rlx.jvp(g, ["z"])  # a complex output is fine in forward mode
    assert jv.outputs[1].dtype == rlx.DType.C64


def test_real_loss_from_complex_values_still_differentiates_through_former_refusal():
    """The example that used to be refused (complex values downstream of wrt) now works."""
    g = rlx.Graph("c")
    x = g.input("x", (2,), "f64")
    z = g.exp(g.cast(x, to="c64"))
    g.set_outputs([g.sum(g.cast(z, to="f64") + x)])
    xs = np.array([0.3, -0.7])
    (gx,) = rlx.run(rlx.grad(g, ["x"]), {"x": xs, "d_output": np.float64(1)})
    np.testing.assert_allclose(gx, np.exp(xs) + 1, rtol=1e-6)
