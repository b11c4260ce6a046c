"""Data-parallel and sharded training on JAX: ``mesh=`` / ``batch_axis=`` / ``param_specs=``
over 8 simulated CPU devices give the single-device losses within 1e-5, the step's inputs
really live sharded; two ``jax.distributed`` processes on loopback give the same (slow)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from jax.sharding import Mesh, PartitionSpec  # noqa: E402

import rlx  # noqa: E402
from training.dp_cases import batches, train  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _mesh():
    if len(jax.devices("cpu")) < 8:
        pytest.skip("needs 8 CPU devices (tests/conftest.py sets XLA_FLAGS before jax loads)")
    return Mesh(np.array(jax.devices("cpu")[:8]), ("data",))


@pytest.fixture(scope="module")
def single():
    trainer, losses = train()
    return losses, trainer.params


def test_data_parallel_equals_single_device(single):
    mesh = _mesh()
    trainer, losses = train(mesh=mesh, batch_axis="data")
    np.testing.assert_allclose(losses, single[0], rtol=1e-5)
    for k, v in single[1].items():
        np.testing.assert_allclose(trainer.params[k], v, rtol=1e-5, atol=1e-6)
    # the step's inputs live sharded: 8 shards of 2 rows; the params replicated on every device
    placed = trainer.engine._place_inputs(batches(1)[0])
    assert placed["x"].sharding.spec == PartitionSpec("data")
    assert {s.data.shape for s in placed["x"].addressable_shards} == {(2, 8)} and len(placed["x"].addressable_shards) == 8
    w1 = trainer.engine.params["w1"]
    assert w1.sharding.is_fully_replicated and len(w1.addressable_shards) == 8


def test_fsdp_param_specs_equal_single_device(single):
    mesh = _mesh()
    trainer, losses = train(mesh=mesh, batch_axis="data", param_specs={"w1": PartitionSpec("data", None),
                                                                         "b1": PartitionSpec("data")})
    np.testing.assert_allclose(losses, single[0], rtol=1e-5)
    w1 = trainer.engine.params["w1"]
    assert w1.sharding.spec == PartitionSpec("data", None) and {s.data.shape for s in w1.addressable_shards} == {(1, 16)}
    state = trainer.engine.states["w1"]["exp_avg"]  # optimizer state sharded like its param
    assert state.sharding.spec == PartitionSpec("data", None)
    for k, v in single[1].items():
        np.testing.assert_allclose(trainer.params[k], v, rtol=1e-5, atol=1e-6)


def test_mesh_errors():
    mesh = _mesh()
    with pytest.raises(rlx.RlxError, match="batch_axis 'model'"):
        train(mesh=mesh, batch_axis="model")
    with pytest.raises(rlx.RlxError, match="param_specs names"):
        train(mesh=mesh, param_specs={"nope": PartitionSpec()})
    with pytest.raises(rlx.RlxError, match="does not split"):
        train(mesh=mesh, param_specs={"w2": PartitionSpec(None, "data")})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_jax_distributed_processes_equal_single_device(single, tmp_path):
    port = _free_port()
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": os.pathsep.join([os.path.dirname(HERE), *sys.path])}
    outs = [tmp_path / f"p{i}.json" for i in range(2)]
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "dp_cases.py"), str(i), str(port), str(outs[i])], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    logs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), logs
    for out in outs:
        got = json.loads(out.read_text())
        np.testing.assert_allclose(got["losses"], single[0], rtol=1e-5)
        np.testing.assert_allclose(got["local_losses"], single[0], rtol=1e-5)  # each process fed its own rows
        for k, v in single[1].items():
            np.testing.assert_allclose(np.array(got["params"][k], np.float32), v, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_data_parallel_batchnorm_module_equals_single_device():
    """BatchNorm's batch statistics over the global batch: the running-stat updates and losses
    of 8-way data parallel equal single-device training."""
    pytest.importorskip("torch")
    from training.torch_cases import cnn_bn, feeds, imported

    mesh = _mesh()
    case, graph, params = imported(cnn_bn)
    batches_ = feeds(graph, case, 4)
    one = rlx.compile_training(graph, optimizer="adamw", lr=1e-2, params=params, backend="jax")
    dp = rlx.compile_training(graph, optimizer="adamw", lr=1e-2, params=params, backend="jax", mesh=mesh, batch_axis="data")
    np.testing.assert_allclose([dp.step(b) for b in batches_], [one.step(b) for b in batches_], rtol=1e-5)
    for name in ("bn.running_mean", "bn.running_var", "bn.num_batches_tracked"):
        np.testing.assert_allclose(dp.params[name], one.params[name], rtol=1e-5, atol=1e-7)
