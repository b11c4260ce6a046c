"""Trainer.save / Trainer.load: resume equals an uninterrupted run bit for bit (numpy, jax,
torch; schedule, loss scale and BatchNorm buffers included), the file is safetensors, a SIGKILL
during save leaves the previous checkpoint loadable, hostile files fail cleanly in a child."""

from __future__ import annotations

import json
import os
import signal
import struct
import time

import numpy as np
import pytest

import rlx
from rlx.train import Trainer, TrainingError, WarmupCosine
from rlx.train.checkpoint import read_tensors
from security.isolate import run_cases
from training.test_training import data, init_params, mlp_graph

HERE = os.path.dirname(os.path.abspath(__file__))


def _trainer(backend="numpy", **kw):
    rng = np.random.default_rng(11)
    init = init_params(rng, np.float32)
    return rlx.compile_training(mlp_graph("f32"), optimizer="adamw", lr=0.02, params=init, backend=backend,
                                schedule=WarmupCosine(warmup=2, total=12), loss_scale="dynamic", **kw)


def _feeds(n):
    rng = np.random.default_rng(12)
    return [data(rng, dtype=np.float32) for _ in range(n)]


@pytest.mark.parametrize("backend", ["numpy", "jax", "torch"])
def test_resume_equals_uninterrupted_bit_for_bit(tmp_path, backend):
    if backend == "jax":
        pytest.importorskip("jax")
    feeds = _feeds(10)
    straight, first = _trainer(backend), _trainer(backend)
    for f in feeds[:5]:
        straight.step(f)
        first.step(f)
    path = tmp_path / "ckpt.safetensors"
    first.save(path)
    resumed = Trainer.load(path)
    assert resumed.backend == backend and resumed.steps == 5 and resumed.optimizer.t == 5
    assert resumed.history == straight.history and resumed.schedule == straight.schedule
    assert resumed.scaler.scale == straight.scaler.scale and resumed.scaler.good_steps == 5
    for f in feeds[5:]:
        assert resumed.step(f) == straight.step(f)
    for k, v in straight.params.items():
        np.testing.assert_array_equal(resumed.params[k], v)
    for n, slots in straight.engine.host_states().items():
        for k, v in slots.items():
            np.testing.assert_array_equal(resumed.engine.host_states()[n][k], v)
    # the file is plain safetensors (the safetensors library reads it) with the state under torch's names
    from safetensors.numpy import load_file

    tensors = load_file(str(path))
    assert {"param/w1", "state/w1/exp_avg", "state/w1/exp_avg_sq"} <= set(tensors)
    np.testing.assert_array_equal(tensors["param/w1"], first.params["w1"])
    # another backend continues the same run
    other = Trainer.load(path, backend="numpy")
    assert other.step(feeds[5]) == pytest.approx(_reloaded_first_loss(path, feeds[5]), rel=1e-6)


def _reloaded_first_loss(path, feed):
    return Trainer.load(path, backend="numpy").loss(feed)


def test_batchnorm_buffers_resume(tmp_path):
    pytest.importorskip("torch")
    from training.torch_cases import cnn_bn, feeds, imported

    case, g, params = imported(cnn_bn)
    batches = feeds(g, case, 6)
    a = rlx.compile_training(g, optimizer="sgd", lr=0.1, momentum=0.9, params=params)
    b = rlx.compile_training(g, optimizer="sgd", lr=0.1, momentum=0.9, params=params)
    for f in batches[:3]:
        a.step(f)
        b.step(f)
    b.save(tmp_path / "bn.safetensors")
    c = Trainer.load(tmp_path / "bn.safetensors")
    assert c.buffers == a.buffers
    for f in batches[3:]:
        assert c.step(f) == a.step(f)
    for k, v in a.params.items():
        np.testing.assert_array_equal(c.params[k], v)
    assert int(c.params["bn.num_batches_tracked"]) == 6


def test_custom_schedule_must_be_given_again(tmp_path):
    t = _trainer()
    t.schedule = lambda k: 0.5
    t.save(tmp_path / "c.safetensors")
    with pytest.raises(TrainingError, match="custom schedule"):
        Trainer.load(tmp_path / "c.safetensors")
    assert Trainer.load(tmp_path / "c.safetensors", schedule=lambda k: 0.5).lr_at(3) == pytest.approx(0.01)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_kill_during_save_leaves_previous_checkpoint(tmp_path):
    path = str(tmp_path / "ckpt.safetensors")
    t = _trainer()
    f = _feeds(1)[0]
    t.step(f)
    t.save(path)
    start = time.perf_counter()
    t.save(path)
    span = time.perf_counter() - start
    t.step(f)
    for i in range(12):
        pid = os.fork()
        if pid == 0:
            try:
                t.save(path)
            finally:
                os._exit(0)
        time.sleep(span * i / 8)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        loaded = Trainer.load(path)  # the old (1 step) or the new (2 steps) checkpoint, whole
        assert loaded.steps in (1, 2)
    leftovers = [n for n in os.listdir(tmp_path) if n != "ckpt.safetensors"]
    for name in leftovers:  # temp files of killed saves; never the checkpoint itself
        assert ".tmp-" in name


def _write(path, header: bytes, body: bytes = b"") -> str:
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + body)
    return str(path)


def test_hostile_checkpoints_fail_cleanly_in_a_child(tmp_path):
    good = tmp_path / "good.safetensors"
    _trainer().save(good)
    raw = good.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8: 8 + n])
    meta = header["__metadata__"]

    def variant(name, edit):
        h = json.loads(json.dumps(header))
        edit(h)
        return _write(tmp_path / name, json.dumps(h).encode(), raw[8 + n:])

    huge = tmp_path / "huge"
    huge.write_bytes(struct.pack("<Q", 1 << 62) + b"{}")  # a header length past any file
    cases = {
        "huge_header": str(huge),
        "offsets_past_end": variant("b", lambda h: h["param/w1"].update(data_offsets=[0, 1 << 40])),
        "shape_mismatch": variant("c", lambda h: h["param/w1"].update(shape=[1000, 1000])),
        "bad_dtype": variant("d", lambda h: h["param/w1"].update(dtype="PICKLE")),
        "graph_not_json": variant("e", lambda h: h["__metadata__"].update(rlx_graph="{not json")),
        "pickle_bytes": _write(tmp_path / "f", b"\x80\x04\x95" + b"cos\nsystem\n"),
        "nested_json": _write(tmp_path / "g", b"[" * 100000 + b"]" * 100000),
        "wrong_format": variant("h", lambda h: h["__metadata__"].update(rlx_training=json.dumps({"format": "x"}))),
        "negative_step": variant("i", lambda h: h["__metadata__"].update(
            rlx_training=meta["rlx_training"].replace('"t": 0', '"t": -4'))),
        "unknown_tensor": variant("j", lambda h: h.update({"evil/x": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}})),
        "a_directory": str(tmp_path),
    }
    outcomes = run_cases(os.path.join(HERE, "checkpoint_children.py"), "load_checkpoint", [[p] for p in cases.values()],
                         memory=3 << 30)
    for label, out in zip(cases, outcomes):
        assert out.exited, (label, out.how)
        assert out.is_a("RlxError"), (label, out.raised, out.message)
    with pytest.raises(TrainingError, match="data_offsets"):
        read_tensors(cases["offsets_past_end"])
