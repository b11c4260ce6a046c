"""Backends and interop: ``jax`` (XLA jit on CPU / GPU, sharding), ``onnx`` (import / export),
``torch`` (import). Each imports its framework lazily; ``import rlx`` imports none of them."""
