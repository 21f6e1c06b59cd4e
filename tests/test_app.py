"""The Streamlit dashboard, headless: change widgets, read what the page shows."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

from twin.dashboard import state as dash
from twin.workload.paths import traces_dir

APP = str(Path(__file__).resolve().parent.parent / "app.py")
TIMEOUT = 90  # seconds per script run: generous, the machines are shared


def _app(bundled: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    if bundled is not None:
        at.session_state["s:bundled"] = bundled
    return at.run()


def _w(at: AppTest, kind: str, name: str, prefix: str = "w"):
    """The one widget of ``kind`` for setting ``name`` (its key is ``<prefix>:<generation>:<name>``)."""
    found = [w for w in getattr(at, kind) if w.key and w.key.startswith(prefix + ":") and w.key.endswith(":" + name)]
    assert len(found) == 1, [w.key for w in getattr(at, kind)]
    return found[0]


def _chart(at: AppTest, name: str) -> AppTest:
    at.segmented_control(key="s:chart").set_value(name)
    return at.run()


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _metrics(at: AppTest) -> list[tuple[str, str, str | None]]:
    return [(m.label, m.value, m.delta) for m in at.metric]


def _whatif(at: AppTest, label: str) -> tuple[str, str | None]:
    """The what-if card for ``label`` (the second of the two cards with that label)."""
    cards = [(v, d) for lab, v, d in _metrics(at) if lab == label]
    assert len(cards) == 2, cards
    return cards[1]


def _verdicts(at: AppTest) -> list[str]:
    return [w.value for w in at.warning] + [s.value for s in at.success]


def _changes(at: AppTest) -> str:
    found = [m.value for m in at.markdown if m.value.startswith(("Changes:", "_No changes"))]
    assert len(found) == 1
    return found[0]


def test_default_page_compares_baseline_with_the_first_variant():
    at = _app()
    _ok(at)
    assert at.selectbox(key="s:bundled").value == "chat_shared_prompt"
    assert "variant **caching-off**" in _changes(at)
    labels = {lab for lab, _, _ in _metrics(at)}
    assert {"Throughput (req/s)", "TTFT p99", "TPOT p99", "Prefix hit rate"} <= labels
    base_hit = next(v for lab, v, _ in _metrics(at) if lab == "Prefix hit rate")
    assert base_hit.endswith("%") and float(base_hit[:-1]) > 50  # a shared 2,000-token system prompt
    _, delta = _whatif(at, "TTFT p99")
    assert delta.startswith("+")  # caching off: every prompt is prefilled in full
    assert len(_verdicts(at)) == 2
    assert sum("No limit binds" in m.value for m in at.markdown) == 2  # 8 req/s: both keep up
    assert len(at.get("plotly_chart")) == 1  # the latency CDFs; the other charts are built when asked for
    assert _chart(at, "Server over time").get("plotly_chart")
    assert at.markdown  # the verdicts stay
    assert any(b.proto.label.endswith("vllm bench serve JSON") for b in at.get("download_button"))


def test_concurrency_cap_verdict_and_raising_the_cap():
    at = _app("concurrency_cap_trap")
    _w(at, "selectbox", "start", "e").set_value("baseline").run()
    _ok(at)
    assert _changes(at).startswith("_No changes")
    verdicts = _verdicts(at)
    assert all(v.startswith("Concurrency cap binds") and "max_num_seqs = 4" in v for v in verdicts)
    assert _w(at, "number_input", "max_num_seqs").value == 4

    _w(at, "number_input", "max_num_seqs").set_value(16).run()
    _ok(at)
    assert "max_num_seqs: 4 → 16" in _changes(at)
    assert any(v.startswith("Concurrency cap binds") for v in _verdicts(at))       # the baseline
    assert any(v.startswith("No serving limit binds") for v in _verdicts(at))      # the what-if
    _, ttft_delta = _whatif(at, "TTFT p99")
    assert ttft_delta.startswith("-")  # no more waiting for a slot
    assert any(m.value == "**Binding limit: concurrency cap (max_num_seqs)**" for m in at.markdown)


def test_bad_widget_value_shows_an_error_not_a_traceback():
    at = _app("concurrency_cap_trap")
    _w(at, "number_input", "max_num_seqs").set_value(64).run()
    _w(at, "number_input", "max_num_batched_tokens").set_value(2).run()  # alone it would clamp max_num_seqs
    assert not at.exception
    assert [e.value for e in at.error] == ["What-if: server: max_num_batched_tokens (2) must be >= max_num_seqs (64)"]
    assert not at.get("plotly_chart")
    _w(at, "number_input", "max_num_batched_tokens").set_value(4096).run()  # fixed: the page comes back
    _ok(at)
    assert at.get("plotly_chart")


def test_tensor_parallel_that_does_not_divide_the_heads_is_an_error():
    at = _app("concurrency_cap_trap")
    _w(at, "number_input", "tensor_parallel_size").set_value(3).run()
    assert not at.exception
    assert len(at.error) == 1 and "tensor_parallel_size" in at.error[0].value and "3" in at.error[0].value


def test_workload_widgets_change_the_traffic():
    at = _app("concurrency_cap_trap")
    assert _w(at, "radio", "arrival_mode").value == "concurrency"
    _w(at, "number_input", "concurrency").set_value(4).run()
    _ok(at)
    assert "concurrency: 16 → 4" in _changes(at)
    assert any(v.startswith("No serving limit binds") for v in _verdicts(at))
    _w(at, "radio", "arrival_mode").set_value("rate").run()
    _w(at, "number_input", "rate_per_s").set_value(2.0).run()
    _ok(at)
    assert "arrivals: concurrency → rate" in _changes(at)


def test_seed_and_variant_selection():
    at = _app("concurrency_cap_trap")
    _ok(at)
    assert "variant **vllm-default**" in _changes(at)
    _w(at, "radio", "arrival_mode").set_value("rate").run()  # Poisson arrivals: the seed matters
    first = _whatif(at, "TTFT p99")
    _w(at, "number_input", "seed", "e").set_value(5).run()
    _ok(at)
    assert _w(at, "number_input", "seed", "e").value == 5
    assert _whatif(at, "TTFT p99") != first
    assert _w(at, "radio", "arrival_mode").value == "rate"  # what-if settings survive a new seed


@pytest.mark.skipif(not dash.speculative_supported() or "speculative_decoding" not in dash.bundled_scenarios(),
                    reason="no speculative_decoding section or scenario")
def test_speculative_decoding_toggle():
    at = _app("speculative_decoding")
    _w(at, "selectbox", "start", "e").set_value("baseline").run()
    _ok(at)
    assert _w(at, "toggle", "spec.enabled").value is True
    assert _w(at, "number_input", "spec.num_speculative_tokens").value == 4
    _w(at, "toggle", "spec.enabled").set_value(False).run()
    _ok(at)
    assert "speculative decoding: on → off" in _changes(at)
    _, delta = _whatif(at, "TPOT p99")
    assert delta.startswith("+")  # one stream: speculation had been cutting the per-token time


def test_load_sweep_draws_throughput_against_latency():
    at = _chart(_app("concurrency_cap_trap"), "Throughput vs latency")
    n = len(at.get("plotly_chart"))
    at.toggle(key="s:sweep").set_value(True).run()
    _ok(at)
    assert len(at.get("plotly_chart")) == n + 1


@pytest.mark.skipif(not (traces_dir() / "azure_llm_2023_conv.csv").exists(), reason="shared traces absent")
def test_trace_scenario_has_replay_window_and_speed_up():
    at = _app("azure_conversation_replay")
    _ok(at)
    assert _w(at, "number_input", "window", "e").value == 300.0
    assert _w(at, "number_input", "time_scale").value == 2.0  # the first variant, twice-the-load
    assert "variant **twice-the-load**" in _changes(at)


def test_switching_scenario_gives_fresh_widgets_and_only_its_own_changes():
    at = _app()
    _w(at, "number_input", "rate_per_s").set_value(2.0).run()
    assert "rate (req/s): 8 → 2" in _changes(at)
    old_keys = {w.key for w in at.number_input if w.key.startswith("w:")}
    at.selectbox(key="s:bundled").set_value("concurrency_cap_trap").run()
    _ok(at)
    assert _changes(at) == "Changes: variant **vllm-default**"  # nothing carried over from the last scenario
    assert not old_keys & {w.key for w in at.number_input}
    _w(at, "selectbox", "start", "e").set_value("baseline").run()
    assert _changes(at).startswith("_No changes")
    assert _w(at, "number_input", "max_num_seqs").value == 4  # the baseline's own value, not the variant's


def test_the_url_carries_the_what_if_both_ways():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"scenario": "concurrency_cap_trap", "start": "baseline", "seed": "0",
                            "w.max_num_seqs": "16"})
    at.run()
    _ok(at)
    assert _w(at, "number_input", "max_num_seqs").value == 16
    assert "max_num_seqs: 4 → 16" in _changes(at)
    _w(at, "number_input", "concurrency").set_value(8).run()
    assert at.query_params["w.concurrency"] == "8" and at.query_params["w.max_num_seqs"] == "16"
    assert at.query_params["scenario"] == "concurrency_cap_trap"
    names = {b.proto.label for b in at.get("download_button")}
    assert "what-if: scenario YAML" in names


def test_a_bad_url_setting_is_one_error():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"scenario": "concurrency_cap_trap", "start": "baseline", "w.max_num_seqs": "many"})
    at.run()
    assert not at.exception
    assert [e.value for e in at.error] == ["URL parameter w.max_num_seqs='many': expected a number"]


def test_verdicts_carry_slo_cost_and_cost_model():
    at = _app("concurrency_cap_trap")
    _ok(at)
    text = [m.value for m in at.markdown] + [c.value for c in at.caption]
    assert sum(t.startswith("SLO ") for t in text) == 2
    assert sum("per million output tokens" in t for t in text) == 2
    assert sum(t.startswith("Cost model: roofline") for t in text) == 2
