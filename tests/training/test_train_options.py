"""compile_training's options against torch: the engines (jax, torch) on torch.optim's formulas,
clipping (clip_grad_norm_), schedules (LambdaLR, LinearLR -> CosineAnnealingLR), gradient
accumulation, loss scaling (GradScaler's schedule) and float16 params with float32 masters."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx
from rlx.train import LossScaler, TrainingError, WarmupCosine
from training.test_training import CONFIGS, TORCH_OPT, data, init_params, mlp_graph, torch_loss

ENGINES = ["jax", "torch"]


def _torch_setup(init, kind, kw):
    tparams = {k: torch.tensor(v, requires_grad=True) for k, v in init.items()}
    return tparams, TORCH_OPT[kind](list(tparams.values()), dict(kw))


def _assert_params(trainer, tparams, rtol=1e-10, atol=1e-12):
    got = trainer.params
    for k, t in tparams.items():
        np.testing.assert_allclose(got[k], t.detach().numpy(), rtol=rtol, atol=atol, err_msg=k)


ENGINE_CASES = [("torch", c) for c in (CONFIGS[1], CONFIGS[2], CONFIGS[3], CONFIGS[5], CONFIGS[6])]
ENGINE_CASES += [("jax", CONFIGS[3]), ("jax", CONFIGS[6])]  # jax compiles per case: two of them


@pytest.mark.parametrize("backend, case", ENGINE_CASES, ids=[f"{b}-{c[0]}-{i}" for i, (b, c) in enumerate(ENGINE_CASES)])
def test_engines_follow_torch_optim(backend, case):
    kind, kw = case
    if backend == "jax":
        pytest.importorskip("jax")
    rng = np.random.default_rng(2)
    init, feed = init_params(rng), data(rng)
    trainer = rlx.compile_training(mlp_graph(), optimizer=kind, params=init, backend=backend, **kw)
    assert trainer.engine.kind == backend
    tparams, topt = _torch_setup(init, kind, kw)
    for _ in range(4):
        topt.zero_grad()
        tl = torch_loss(tparams, feed)
        tl.backward()
        topt.step()
        assert trainer.step(feed) == pytest.approx(tl.item(), rel=1e-12)
    _assert_params(trainer, tparams)
    with torch.no_grad():
        assert trainer.loss(feed) == pytest.approx(torch_loss(tparams, feed).item(), rel=1e-12)


def test_unknown_keywords_are_errors_never_optimizer_options():
    rng = np.random.default_rng(0)
    init = init_params(rng)
    with pytest.raises(TrainingError, match=r"unknown keyword\(s\) \['mesh_size'\]"):
        rlx.compile_training(mlp_graph(), optimizer="adam", params=init, mesh_size=8)
    with pytest.raises(TrainingError, match="need backend='jax'"):
        rlx.compile_training(mlp_graph(), optimizer="adam", params=init, mesh=object())
    with pytest.raises(TrainingError, match="need mesh="):
        rlx.compile_training(mlp_graph(), backend="jax", params=init, batch_axis="data")
    with pytest.raises(TrainingError, match="momentum"):  # a known option the optimizer does not take
        rlx.compile_training(mlp_graph(), optimizer="adam", params=init, momentum=0.9)
    with pytest.raises(TrainingError, match="accumulate"):
        rlx.compile_training(mlp_graph(), params=init, accumulate=0)
    # AdamW's default weight decay is torch's (0.01)
    assert rlx.compile_training(mlp_graph(), optimizer="adamw", params=init).optimizer.weight_decay == 0.01


@pytest.mark.parametrize("backend", ["numpy", *ENGINES])
def test_clip_grad_norm_like_torch(backend):
    if backend == "jax":
        pytest.importorskip("jax")
    rng = np.random.default_rng(3)
    init, feed = init_params(rng), data(rng)
    trainer = rlx.compile_training(mlp_graph(), optimizer="sgd", lr=0.1, momentum=0.9, params=init, backend=backend,
                                   clip_grad_norm=0.05)
    tparams, topt = _torch_setup(init, "sgd", {"lr": 0.1, "momentum": 0.9})
    norms = []
    for _ in range(4):
        topt.zero_grad()
        torch_loss(tparams, feed).backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(list(tparams.values()), 0.05)))
        topt.step()
        trainer.step(feed)
    assert min(norms) > 0.05  # the clip was active on every step
    _assert_params(trainer, tparams)


def test_schedules_like_torch_schedulers():
    rng = np.random.default_rng(4)
    init, feed = init_params(rng), data(rng)
    # the closed form equals torch's LinearLR warmup then CosineAnnealingLR
    sched = WarmupCosine(warmup=3, total=10, start_factor=0.1)
    tparams, topt = _torch_setup(init, "adam", {"lr": 0.05})
    tsched = torch.optim.lr_scheduler.SequentialLR(topt, [
        torch.optim.lr_scheduler.LinearLR(topt, start_factor=0.1, total_iters=3),
        torch.optim.lr_scheduler.CosineAnnealingLR(topt, T_max=7)], milestones=[3])
    trainer = rlx.compile_training(mlp_graph(), optimizer="adam", lr=0.05, params=init, schedule=sched)
    for step in range(10):
        assert trainer.lr_at(step) == pytest.approx(topt.param_groups[0]["lr"], rel=1e-12, abs=1e-15)
        topt.zero_grad()
        torch_loss(tparams, feed).backward()
        topt.step()
        tsched.step()
        trainer.step(feed)
    _assert_params(trainer, tparams, rtol=1e-9)
    # a callable: LambdaLR's factor of the base lr
    lam = lambda k: 1.0 / (1 + k)
    tparams, topt = _torch_setup(init, "sgd", {"lr": 0.1})
    tsched = torch.optim.lr_scheduler.LambdaLR(topt, lam)
    trainer = rlx.compile_training(mlp_graph(), optimizer="sgd", lr=0.1, params=init, schedule=lam, backend="torch")
    for _ in range(5):
        topt.zero_grad()
        torch_loss(tparams, feed).backward()
        topt.step()
        tsched.step()
        trainer.step(feed)
    _assert_params(trainer, tparams)
    with pytest.raises(TrainingError):
        WarmupCosine(warmup=5, total=3)


@pytest.mark.parametrize("backend", ["numpy", *ENGINES])
def test_gradient_accumulation_like_torch(backend):
    if backend == "jax":
        pytest.importorskip("jax")
    rng = np.random.default_rng(5)
    init, feed = init_params(rng), data(rng, n=32)
    halves = [{k: v[:16] for k, v in feed.items()}, {k: v[16:] for k, v in feed.items()}]
    trainer = rlx.compile_training(mlp_graph(n=16), optimizer="adam", lr=0.02, params=init, backend=backend, accumulate=2)
    tparams, topt = _torch_setup(init, "adam", {"lr": 0.02})
    for _ in range(3):
        topt.zero_grad()
        for half in halves:  # torch's idiom: (loss / k).backward() per micro-batch, one step
            (torch_loss(tparams, half) / 2).backward()
        topt.step()
        for half in halves:
            trainer.step(half)
    assert trainer.steps == 3 and trainer.optimizer.t == 3 and len(trainer.history) == 6
    _assert_params(trainer, tparams)


@pytest.mark.parametrize("backend", ["numpy", *ENGINES])
def test_loss_scaling(backend):
    if backend == "jax":
        pytest.importorskip("jax")
    rng = np.random.default_rng(6)
    init, feed = init_params(rng, np.float32), data(rng, dtype=np.float32)
    plain = rlx.compile_training(mlp_graph("f32"), optimizer="adam", lr=0.01, params=init, backend=backend)
    scaled = rlx.compile_training(mlp_graph("f32"), optimizer="adam", lr=0.01, params=init, backend=backend,
                                  loss_scale=LossScaler(scale=2.0 ** 10, interval=2))
    for _ in range(5):
        assert scaled.step(feed) == plain.step(feed)
    # a power-of-two scale and unscale are exact: the same bits as unscaled training
    for k in init:
        np.testing.assert_array_equal(scaled.params[k], plain.params[k])
    assert scaled.scaler.scale == 2.0 ** 12  # grown twice (interval 2)
    # non-finite gradients (an overflow): the step is skipped (params and Adam's step count kept), the scale backs off
    before = scaled.params
    bad = {**feed, "y": np.where(np.arange(len(feed["y"]))[:, None] == 3, np.float32(3e38), feed["y"] * 1e30).astype(np.float32)}
    scaled.step(bad)
    assert scaled.scaler.scale == 2.0 ** 11 and scaled.scaler.skipped == 1 and scaled.optimizer.t == 5
    for k in init:
        np.testing.assert_array_equal(scaled.params[k], before[k])
    with pytest.raises(TrainingError, match="loss_scale"):
        rlx.compile_training(mlp_graph("f32"), params=init, loss_scale="huge")


@pytest.mark.parametrize("backend", ["numpy", *ENGINES])
def test_float16_params_train_on_float32_masters(backend):
    if backend == "jax":
        pytest.importorskip("jax")
    rng = np.random.default_rng(7)
    init, feed = init_params(rng, np.float32), data(rng, n=64, dtype=np.float32)
    half = {k: v.astype(np.float16) for k, v in init.items()}
    feed16 = {k: v.astype(np.float16) for k, v in feed.items()}
    g = mlp_graph("f16", n=64)
    g32 = rlx.compile_training(mlp_graph("f32", n=64), optimizer="adam", lr=0.01, params=init)
    trainer = rlx.compile_training(g, optimizer="adam", lr=0.01, params=half, loss_scale="dynamic", backend=backend)
    for _ in range(30):
        trainer.step(feed16)
        g32.step(feed)
    master = trainer.engine.host_master()
    assert set(master) == set(init) and all(m.dtype == np.float32 for m in master.values())
    for k in init:  # the f16 params are the masters rounded; the masters follow f32 training
        np.testing.assert_array_equal(trainer.params[k], master[k].astype(np.float16))
        np.testing.assert_allclose(master[k], g32.params[k], atol=2e-2)
    assert trainer.history[-1] == pytest.approx(g32.history[-1], rel=5e-2) and trainer.history[-1] < 0.7 * trainer.history[0]
    assert trainer.scaler.skipped == 1 and trainer.scaler.scale == 2.0 ** 15  # 2**16 overflows float16: backed off once
