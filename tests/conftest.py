import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):  # jax sharding tests: 8 CPU devices, set before jax loads
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()


@pytest.fixture
def temporary_op():
    """Register test-only ops for one test; they are removed afterwards so registry walks stay clean."""
    from rlx.ir.opdef import has_op, register_op, unregister_op

    added: list[str] = []

    def add(opdef):
        if has_op(opdef.name):
            unregister_op(opdef.name)
        register_op(opdef)
        added.append(opdef.name)
        return opdef

    yield add
    for name in added:
        unregister_op(name)


@pytest.fixture
def custom_cleanup():
    """Custom ops registered during the test are unregistered afterwards (registry walks stay clean)."""
    import rlx

    before = set(rlx.custom_ops())
    yield
    for name in set(rlx.custom_ops()) - before:
        rlx.unregister_custom_op(name)
