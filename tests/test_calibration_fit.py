"""Fitting the per-step cost model: recovery of known coefficients, NNLS non-negativity, the held-out split,
metrics, the recorded range and the profile/samples JSON round trips. No torch needed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calibration.fit import (
    base_features, design_matrix, error_metrics, fit_samples, make_profile, save_profile, solve, split_indices,
)
from calibration.samples import StepSample, load_samples, save_samples, timing_noise
from twin.cost.profile import ProfileCostModel
from twin.cost.profile_features import FEATURE_NAMES, RANGE_FIELDS, step_features
from twin.cost.profile_file import read_profile

TRUE = {"step": 2e-3, "seqs": 5e-5, "tokens": 4e-6, "tokens_over_knee": 6e-5, "attn_pairs": 2e-9,
        "kv_read_tokens": 3e-7, "padded_kv_tokens": 1e-7, "mixed_step": 2e-3}
KNEE = 128.0


def true_time(n, c, coef=TRUE, knee=KNEE) -> float:
    seqs, tokens, pairs, kv, _longest, padded = step_features(n, c)
    return (coef["step"] + coef["seqs"] * seqs + coef["tokens"] * tokens
            + coef["tokens_over_knee"] * max(0.0, tokens - knee) + coef["attn_pairs"] * pairs
            + coef["kv_read_tokens"] * kv + coef["padded_kv_tokens"] * padded
            + coef["mixed_step"] * (tokens > seqs))


def synthetic_samples(noise: float = 0.0, seed: int = 0, coef=TRUE, knee=KNEE) -> list[StepSample]:
    rng = np.random.default_rng(seed)
    shapes = []
    for b in (1, 2, 4, 8, 16, 32, 64):
        for c in (16, 128, 512, 2048):
            shapes.append(("decode", [1] * b, [c] * b))
    for n in (8, 32, 64, 128, 256, 512, 1024, 2048):
        for c in (0, 256, 1024):
            shapes.append(("prefill", [n], [c]))
    for _ in range(40):
        b = int(rng.integers(1, 24))
        n = [1] * b + [int(rng.integers(2, 300))]
        c = [int(rng.integers(1, 1500)) for _ in range(b)] + [int(rng.integers(0, 500))]
        shapes.append(("random", n, c))
    out = []
    for kind, n, c in shapes:
        t = true_time(n, c, coef, knee)
        times = [t * (1.0 + noise * rng.standard_normal()) for _ in range(5)]
        out.append(StepSample(kind, n, c, times))
    return out


def test_recovers_known_coefficients_exactly_without_noise():
    fit = fit_samples(synthetic_samples())
    assert fit.knee_tokens == KNEE
    for name in FEATURE_NAMES:
        assert fit.coefficients[name] == pytest.approx(TRUE[name], rel=1e-6, abs=1e-15), name
    assert fit.metrics["test"]["mape_pct"] < 1e-6
    assert fit.metrics["train"]["n"] + fit.metrics["test"]["n"] == len(synthetic_samples())


def test_recovers_coefficients_under_noise_and_reports_held_out_error():
    fit = fit_samples(synthetic_samples(noise=0.03, seed=1))
    for name in ("step", "seqs", "tokens", "tokens_over_knee", "kv_read_tokens", "mixed_step"):
        assert fit.coefficients[name] == pytest.approx(TRUE[name], rel=0.3), name
    # the held-out error is about the noise of a median of 5 runs (3% / sqrt(5) * 0.8 ~ 1-2%)
    assert fit.metrics["test"]["mape_pct"] < 5.0
    assert fit.metrics["test"]["n"] > 0 and "p90_abs_error_s" in fit.metrics["test"]


def test_no_knee_when_time_is_linear_in_tokens():
    coef = dict(TRUE, tokens_over_knee=0.0)
    fit = fit_samples(synthetic_samples(coef=coef))
    assert fit.knee_tokens == 0.0 and fit.coefficients["tokens_over_knee"] == 0.0
    assert fit.coefficients["tokens"] == pytest.approx(coef["tokens"], rel=1e-6)


def test_nnls_keeps_coefficients_non_negative_where_least_squares_would_not():
    # a feature whose true effect is slightly negative (think: noise correlated with it): plain least
    # squares follows it below zero, NNLS clamps it at 0 and keeps the fit sensible
    coef = dict(TRUE, kv_read_tokens=-1e-8, padded_kv_tokens=0.0)
    samples = synthetic_samples(coef=coef)
    free = fit_samples(samples, nonnegative=False, knees=[KNEE])
    assert free.coefficients["kv_read_tokens"] < 0
    nn = fit_samples(samples, knees=[KNEE])
    assert all(v >= 0 for v in nn.coefficients.values())
    assert nn.options["method"] == "nnls" and free.options["method"] == "lstsq"


def test_solve_rescales_columns_and_zeroes_dead_ones():
    rng = np.random.default_rng(0)
    X = np.column_stack([np.ones(50), rng.uniform(1, 1e7, 50), np.zeros(50)])
    y = 1e-3 + 2e-10 * X[:, 1]
    coef = solve(X, y)
    assert coef == pytest.approx([1e-3, 2e-10, 0.0], rel=1e-6)


def test_split_is_stratified_seeded_and_leaves_training_data():
    kinds = ["decode"] * 20 + ["prefill"] * 10 + ["mixed"] * 2
    a, b = split_indices(kinds, 0.2, 7), split_indices(kinds, 0.2, 7)
    assert (a == b).all()
    kinds_arr = np.array(kinds)
    assert a[kinds_arr == "decode"].sum() == 4 and a[kinds_arr == "prefill"].sum() == 2
    assert a[kinds_arr == "mixed"].sum() == 0           # too few to hold any out
    assert not (split_indices(kinds, 0.2, 8) == a).all()


def test_error_metrics():
    m = error_metrics(np.array([1.0, 2.0, 4.0]), np.array([1.1, 2.0, 3.0]))
    assert m["n"] == 3
    assert m["mape_pct"] == pytest.approx((10 + 0 + 25) / 3)
    assert m["max_ape_pct"] == pytest.approx(25)
    assert m["p90_abs_error_s"] == pytest.approx(np.percentile([0.1, 0.0, 1.0], 90))


def test_range_and_residuals_are_recorded():
    samples = synthetic_samples()
    fit = fit_samples(samples)
    base = base_features(samples)
    for j, name in enumerate(RANGE_FIELDS):
        assert fit.range[name] == [base[:, j].min(), base[:, j].max()]
    assert len(fit.residuals["measured_s"]) == len(samples)
    assert set(fit.residuals["split"]) == {"train", "test"}
    assert fit.range["seqs"] == [1, 64] and fit.range["max_seq_len"][1] == 2048 + 1024


def test_too_few_samples_is_a_clear_error():
    with pytest.raises(ValueError, match="training samples"):
        fit_samples(synthetic_samples()[:6])


def test_design_matrix_matches_step_features():
    samples = synthetic_samples()[:10]
    X = design_matrix(base_features(samples), KNEE)
    assert X.shape == (10, len(FEATURE_NAMES))
    coef = np.array([TRUE[n] for n in FEATURE_NAMES])
    for row, s in zip(X, samples):
        assert row @ coef == pytest.approx(true_time(s.num_new_tokens, s.num_computed_before), rel=1e-12)


def test_profile_json_round_trip(tmp_path):
    samples = synthetic_samples(noise=0.01)
    fit = fit_samples(samples)
    model = {"name": "tiny-llama", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 8,
             "num_key_value_heads": 4, "head_dim": 32, "intermediate_size": 704, "vocab_size": 8192}
    doc = make_profile(fit, model=model, device={"type": "cpu", "name": "test cpu", "catalog_gpu": "CPU"},
                       dtype="fp32", environment={"torch": "x"}, plan={"repeats": 5}, samples_file="s.json")
    path = save_profile(tmp_path / "p.json", doc)
    back = read_profile(path)
    assert back["format"] == "twin-profile" and back["version"] == 1
    assert back["cost_model"]["coefficients"] == fit.coefficients
    assert back["cost_model"]["knee_tokens"] == fit.knee_tokens
    assert back["range"] == fit.range and back["model"] == model and back["dtype"] == "fp32"
    assert back["fit"]["metrics"]["test"] == pytest.approx(fit.metrics["test"])
    cm = ProfileCostModel(path)
    pred = fit.predict(samples)

    class Step:
        def __init__(self, s):
            self.num_new_tokens, self.num_computed_before = s.num_new_tokens, s.num_computed_before
            self.num_spec_tokens = [0] * len(s.num_new_tokens)

    for s, p in zip(samples, pred):
        assert cm.step_time_s(Step(s)) == pytest.approx(p, rel=1e-9)
    json.loads(path.read_text())          # plain JSON


def test_samples_file_round_trip(tmp_path):
    samples = synthetic_samples(noise=0.02)[:7]
    samples[0].device_times_s = [1e-3] * 5
    path = save_samples(tmp_path / "s.json", samples, {"device_type": "cpu"}, {"repeats": 5},
                        replay={"num_steps": 0})
    back, doc = load_samples(path)
    assert [b.to_dict() for b in back] == [s.to_dict() for s in samples]
    assert doc["environment"] == {"device_type": "cpu"} and doc["replay"] == {"num_steps": 0}
    assert timing_noise(back) is not None and timing_noise(back) > 0
    (tmp_path / "bad.json").write_text('{"format": "nope"}')
    with pytest.raises(ValueError, match="format"):
        load_samples(tmp_path / "bad.json")


def test_decode_padding_is_fitted_and_recorded_in_the_profile():
    from twin.cost.profile_features import decode_padded_slots

    pad = ((1, 2, 4, 8, 16, 32, 64), 16)
    samples = []
    for s in synthetic_samples():
        n, c = s.num_new_tokens, s.num_computed_before
        t = true_time(n, c)
        if all(x == 1 for x in n):      # a padded graph reads its bucket, not seqs x longest
            longest = max(c) + 1
            t += TRUE["padded_kv_tokens"] * (decode_padded_slots(len(n), longest, pad) - len(n) * longest)
        samples.append(StepSample(s.kind, n, c, [t] * 3))
    fit = fit_samples(samples, decode_padding=pad)
    assert fit.metrics["test"]["mape_pct"] < 1e-6
    assert fit.coefficients["padded_kv_tokens"] == pytest.approx(TRUE["padded_kv_tokens"], rel=1e-6)
    doc = make_profile(fit, model={"name": "m"}, device={"type": "cpu"}, dtype="fp32")
    assert doc["decode_padding"] == {"batch_buckets": [1, 2, 4, 8, 16, 32, 64], "block_size": 16}
    assert fit_samples(samples).metrics["test"]["mape_pct"] > 0.1      # unpadded features cannot explain it
