"""rlx.save over an existing model, SIGKILLed at random moments and at every file step: the old
or the new model always loads (never neither), and a later successful save leaves no debris."""

from __future__ import annotations

import os
import random
import signal
import time

import numpy as np
import pytest

import rlx

KILLS = int(os.environ.get("RLX_SAVE_KILLS", "120"))


def _model(seed: int) -> tuple[rlx.Graph, dict[str, np.ndarray]]:
    g = rlx.Graph(f"m{seed}")
    x = g.input("x", (4, 256))
    w = g.param("w", (256, 256))
    g.set_outputs([g.tanh(x @ w) * float(seed)])
    return g, {"w": np.random.default_rng(seed).standard_normal((256, 256)).astype(np.float32) + seed}


def _which(path: str, models: dict[str, tuple]) -> str:
    try:
        g, params = rlx.load(path, with_params=True)
    except rlx.RlxError:
        return "neither"
    for label, (mg, mp) in models.items():
        if rlx.fingerprint(g) == rlx.fingerprint(mg) and np.array_equal(params["w"], mp["w"]):
            return label
    return "neither"


def _save_in_child(path: str, model: tuple, delay: float) -> None:
    pid = os.fork()
    if pid == 0:
        try:
            rlx.save(model[0], path, params=model[1])
        finally:
            os._exit(0)
    time.sleep(delay)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_killed_saves_leave_old_or_new(tmp_path):
    path = str(tmp_path / "m.rlx")
    models = {"old": _model(1), "new": _model(2)}
    rlx.save(models["old"][0], path, params=models["old"][1])
    start = time.perf_counter()
    rlx.save(models["new"][0], path, params=models["new"][1])
    span = time.perf_counter() - start
    rng = random.Random(0)
    outcomes = {"old": 0, "new": 0, "neither": 0}
    current = "new"
    for _ in range(KILLS):
        target = "old" if current == "new" else "new"
        _save_in_child(path, models[target], rng.uniform(0, 1.5 * span))
        got = _which(path, models)
        outcomes[got] += 1
        assert got in (current, target), (outcomes, sorted(os.listdir(tmp_path)))
        current = got
    print(f"{KILLS} kills: {outcomes}")
    assert outcomes["neither"] == 0
    rlx.save(models["old"][0], path, params=models["old"][1])
    assert sorted(os.listdir(tmp_path)) == ["m.rlx", "m.rlx.safetensors"]
    assert _which(path, models) == "old"


@pytest.mark.parametrize("step", range(8))
def test_crash_at_each_file_step(tmp_path, monkeypatch, step):
    """The save stops dead (os._exit) before the step-th rename / write-sync, in a forked child."""
    path = str(tmp_path / "m.rlx")
    models = {"old": _model(1), "new": _model(2)}
    rlx.save(models["old"][0], path, params=models["old"][1])
    pid = os.fork()
    if pid == 0:
        calls = {"n": 0}
        real_replace, real_fsync = os.replace, os.fsync

        def counted(real):
            def call(*a):
                if calls["n"] == step:
                    os._exit(3)
                calls["n"] += 1
                return real(*a)
            return call
        os.replace, os.fsync = counted(real_replace), counted(real_fsync)
        try:
            rlx.save(models["new"][0], path, params=models["new"][1])
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert _which(path, models) in ("old", "new")
    rlx.save(models["new"][0], path, params=models["new"][1])
    assert sorted(os.listdir(tmp_path)) == ["m.rlx", "m.rlx.safetensors"]
