"""A small classifier graph and data for the data-parallel tests, and the script both
``jax.distributed`` processes run (``python dp_cases.py PROCESS_ID PORT OUT``)."""

from __future__ import annotations

import json
import sys

import numpy as np

N, D, H, C = 16, 8, 16, 4


def graph():
    import rlx

    g = rlx.Graph("dp_classifier")
    x = g.input("x", (N, D))
    onehot = g.input("onehot", (N, C))
    h = g.tanh(x @ g.param("w1", (D, H)) + g.param("b1", (H,)))
    logits = h @ g.param("w2", (H, C))
    shifted = logits - g.max(logits, axes=[1], keep_dim=True)
    logp = shifted - g.log(g.sum(g.exp(shifted), axes=[1], keep_dim=True))
    g.set_outputs([-g.mean(g.sum(onehot * logp, axes=[1]))])
    return g


def params(seed=0):
    r = np.random.default_rng(seed)
    return {"w1": (r.standard_normal((D, H)) * 0.4).astype(np.float32), "b1": np.zeros(H, np.float32),
            "w2": (r.standard_normal((H, C)) * 0.4).astype(np.float32)}


def batches(steps, seed=1):
    r = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        labels = r.integers(0, C, N)
        out.append({"x": r.standard_normal((N, D)).astype(np.float32), "onehot": np.eye(C, dtype=np.float32)[labels]})
    return out


def train(steps=6, **kw):
    import rlx

    trainer = rlx.compile_training(graph(), optimizer="adamw", lr=0.05, params=params(), backend="jax", **kw)
    return trainer, [trainer.step(b) for b in batches(steps)]


def _distributed(process_id: int, port: int, out: str) -> None:
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=process_id,
                               local_device_ids=None)
    from jax.sharding import Mesh

    devices = jax.devices()
    assert len(devices) == 8 and len(jax.local_devices()) == 4, (devices, jax.local_devices())
    mesh = Mesh(np.array(devices), ("data",))
    trainer, losses = train(mesh=mesh, batch_axis="data")
    final = {k: v.tolist() for k, v in trainer.params.items()}
    # the same run fed process-local rows: this process's half of every batch
    import rlx

    local = rlx.compile_training(graph(), optimizer="adamw", lr=0.05, params=params(), backend="jax", mesh=mesh)
    half = N // 2
    local_losses = [local.step({k: v[process_id * half:(process_id + 1) * half] for k, v in b.items()}) for b in batches(6)]
    with open(out, "w") as f:
        json.dump({"losses": losses, "params": final, "local_losses": local_losses}, f)
    jax.distributed.shutdown()


if __name__ == "__main__":
    _distributed(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
