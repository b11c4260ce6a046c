"""``backend="auto"``'s timing rule (rlx.backends.auto.time_candidates) against recorded measurements: the quiet
1-thread zoo run (benchmarks/README.md, 2026-12-06 16:49 UTC) gave each engine's warm per-call time (the
"trio" medians, ~0.1 s samples) and its time in samples straight after other contenders (the first round).
Fake engines replay those costs on a fake clock, with per-call noise, a neighbour's burst now and then, and
a cache-cold first call after another engine ran (and, in one case, the other engine's threads spinning
after its call); the rule must pick an engine within 5% of the warm fastest on every row (two seeds in 40 may
miss on the 7% gap of one row). Where the engines are 5-7% apart (ResNet-18, EfficientNet-B0), the rule
before this one (no warm call before a sample, short runoff samples) picked the slower one."""

from __future__ import annotations

import numpy as np
import pytest

from rlx.backends import auto

# model, onnxruntime warm ms, its cold / warm ratio, OpenVINO warm ms, its cold / warm ratio
RECORDED = [
    ("gpt2", 0.06509, 1.14, 0.05446, 1.28),
    ("t5_encoder", 0.05187, 1.32, 0.04345, 1.51),
    ("swin", 0.5457, 1.20, 0.3675, 1.29),
    ("convnext_hf", 0.0418, 1.27, 0.05475, 1.27),
    ("resnet_timm", 1.25, 1.29, 1.318, 1.48),
    ("mobilenetv3", 0.1246, 1.71, 0.1489, 1.78),
    ("efficientnet", 0.1318, 1.92, 0.1403, 2.07),
    ("whisper", 0.07488, 1.27, 0.0684, 1.33),
    ("resnet_tv", 0.9868, 1.49, 0.9195, 1.81),
]


class _Clock:
    def __init__(self):
        self.t = 0.0
        self.last: object = None
        self.spinning: dict[object, float] = {}  # engine -> until when its worker threads spin

    def __call__(self) -> float:
        return self.t


class _Engine:
    """``run`` advances the clock by the warm cost times noise; the first call after another engine ran also
    pays the cold penalty (three warm calls' worth of the recorded cold excess); while this engine's threads
    spin (``spin_s`` after its last call) another engine's calls cost ``spin_cost`` times more."""

    def __init__(self, clock: _Clock, warm_s: float, cold_ratio: float, rng: np.random.Generator, spin_s: float = 0.0,
                 spin_cost: float = 1.0):
        self.clock, self.warm, self.cold, self.rng = clock, warm_s, cold_ratio, rng
        self.spin_s, self.spin_cost = spin_s, spin_cost

    def run(self, feed):
        cost = self.warm * float(self.rng.lognormal(0.0, 0.04))
        if self.rng.random() < 0.03:  # a neighbour took the core for a while
            cost *= 3.0
        if self.clock.last is not self:
            cost += 3.0 * (self.cold - 1.0) * self.warm
        for other, until in self.clock.spinning.items():
            if other is not self and until > self.clock.t:  # its threads take the cores from this call
                cost *= other.spin_cost
        self.clock.last = self
        self.clock.t += cost
        self.clock.spinning[self] = self.clock.t + self.spin_s


def _pick(row, seed: int) -> tuple[str, float]:
    _, ort_ms, ort_cold, ov_ms, ov_cold = row
    rng, clock = np.random.default_rng(seed), _Clock()
    warm = {"onnxruntime": ort_ms * 1e-3, "openvino": ov_ms * 1e-3}
    exes = {"onnxruntime": _Engine(clock, warm["onnxruntime"], ort_cold, rng),
            "openvino": _Engine(clock, warm["openvino"], ov_cold, rng)}
    medians, pruned = auto.time_candidates(exes, {}, clock)
    assert not pruned  # engines within 3x of each other are never pruned
    chosen = min(medians, key=medians.__getitem__)
    return chosen, warm[chosen] / min(warm.values())


def _misses(row, seeds: int = 40) -> int:
    return sum(_pick(row, seed)[1] > 1.05 for seed in range(seeds))


@pytest.mark.parametrize("row", RECORDED, ids=[r[0] for r in RECORDED])
def test_the_rule_picks_within_5_percent_of_the_warm_fastest(row):
    # at most two seeds in 40 off (the noise above is harsher than a quiet machine's: 3 of 100 seeds on the 7%
    # gap of the torchvision ResNet-18 row, none elsewhere; the rule with one warm call: 8 of 200)
    assert _misses(row) <= 2, row[0]


def test_the_rule_before_missed_the_resnet_rows(monkeypatch):
    # the same replay through the rule before this one: samples straight after the other engine, medians, the
    # runoff's samples as short as the rounds'
    monkeypatch.setattr(auto, "WARM_CALLS", 0)
    monkeypatch.setattr(auto, "WARM_SECONDS", 0.0)
    monkeypatch.setattr(auto, "QUANTILE", 50)
    monkeypatch.setattr(auto, "RUNOFF_SECONDS", auto.SAMPLE_SECONDS)
    rows = {r[0]: r for r in RECORDED}
    assert _misses(rows["resnet_tv"]) + _misses(rows["resnet_timm"]) >= 4


def test_without_the_warm_call_a_cold_penalty_decides(monkeypatch):
    # A is 5% faster warm but its first call after B costs 3 calls more: samples of a few calls straight after
    # the switch rank it second; the untimed warm call before each sample gives the warm ranking back
    row = ("cold_a", 1.0, 2.0, 1.05, 1.0)
    names = ("onnxruntime", "openvino")
    assert {_pick(row, s)[0] for s in range(6)} == {names[0]}
    monkeypatch.setattr(auto, "WARM_CALLS", 0)
    monkeypatch.setattr(auto, "WARM_SECONDS", 0.0)
    assert {_pick(row, s)[0] for s in range(6)} == {names[1]}


def test_the_warm_period_outlasts_the_other_engines_spinning_threads(monkeypatch):
    # LeViT-128S at 2 threads (benchmarks/README.md): OpenVINO 3.9 ms a call alone, onnxruntime 4.2; onnxruntime's
    # worker threads spin after its call and slow what runs next. With one warm call before each sample the
    # rule timed OpenVINO in onnxruntime's wake and picked onnxruntime (5 calibrations of 5 on the machine);
    # warm calls lasting WARM_SECONDS time it quiet.
    def pick(seed: int) -> str:
        rng, clock = np.random.default_rng(seed), _Clock()
        exes = {"onnxruntime": _Engine(clock, 4.2e-3, 1.0, rng, spin_s=0.02, spin_cost=1.3),
                "openvino": _Engine(clock, 3.9e-3, 1.0, rng)}
        medians, _ = auto.time_candidates(exes, {}, clock)
        return min(medians, key=medians.__getitem__)

    assert {pick(seed) for seed in range(20)} == {"openvino"}
    monkeypatch.setattr(auto, "WARM_SECONDS", 0.0)
    assert {pick(seed) for seed in range(20)} == {"onnxruntime"}


def test_a_candidate_far_slower_in_the_warm_up_is_pruned():
    clock, rng = _Clock(), np.random.default_rng(0)
    exes = {"onnxruntime": _Engine(clock, 1e-4, 1.0, rng), "numpy": _Engine(clock, 5e-4, 1.0, rng)}
    medians, pruned = auto.time_candidates(exes, {}, clock)
    assert list(medians) == ["onnxruntime"] and "numpy" in pruned and pruned["numpy"].endswith("x the fastest candidate's warm-up time")


def test_the_agreement_check_keeps_float_rounding_and_drops_wrong_outputs():
    """A candidate is checked against the numpy executor before timing. A deep network's float32 rounding
    reaches a few 1e-4 of the output's largest magnitude (EfficientNetV2: 2.5e-4, torch eager's own
    difference too): kept; a real error, a NaN where there is none, another shape: dropped."""
    rng = np.random.default_rng(0)
    want = rng.standard_normal((4, 1000)).astype(np.float32) * 3
    scale = float(np.abs(want).max())
    rounding = want + (rng.uniform(-3e-4, 3e-4, want.shape) * scale).astype(np.float32)
    assert auto._agrees([rounding], [want])
    wrong = want.copy()
    wrong[1, 7] += 5e-3 * scale
    assert not auto._agrees([wrong], [want])
    nan = want.copy()
    nan[0, 0] = np.nan
    assert not auto._agrees([nan], [want]) and auto._agrees([nan], [nan])
    assert not auto._agrees([want[:, :10]], [want]) and not auto._agrees([want], [want, want])
    assert auto._agrees([np.zeros(3, np.float32)], [np.zeros(3, np.float32)])
    assert not auto._agrees([np.full(3, 1e-3, np.float32)], [np.zeros(3, np.float32)])
