"""JAX backend tests: 8 simulated CPU devices for the sharding tests.

XLA reads ``XLA_FLAGS`` once, when jax is first imported, so the flag must be set before
any test module imports jax. ``tests/conftest.py`` sets it for the whole run (it loads
before every test module); this file repeats it for runs rooted in tests/backends.
Sharding tests skip, with the reason, when jax was imported earlier without it.
"""

import os

_FLAG = "--xla_force_host_platform_device_count=8"
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FLAG}".strip()
