"""The dashboard's KV-cache format: the form's default, the what-if, the shared URL, uploads, and the page."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from twin.dashboard import share
from twin.dashboard import state as dash
from twin.errors import TwinInputError
from twin.scenario import Scenario, load_scenario
from twin.yaml_input import parse_yaml

ROOT = Path(__file__).resolve().parent.parent
KIMI = "kimi_k2_5_int4_h200_tp8"


def _kimi() -> dict:
    """The bundled Kimi-K2.5 scenario, cut to a few requests."""
    raw = load_scenario(ROOT / "scenarios" / f"{KIMI}.yaml").raw()
    raw["workload"]["num_requests"] = 8
    raw["workload"]["arrivals"]["concurrency"] = 4
    return raw


def _nvfp4(kv_dtype: str) -> dict:
    """The Kimi scenario's what-if on the NVFP4 checkpoint, on B200, with KV format ``kv_dtype``."""
    raw = _kimi()
    d = dash.form_defaults(raw)
    return dash.apply_form(raw, dict(d, model="kimi-k2.5-nvfp4", gpu="B200", kv_dtype=kv_dtype), d)


def test_the_choices_are_auto_and_the_schemas_formats():
    assert dash.KV_DTYPES == ("auto", "bf16", "fp16", "fp8", "fp32")


def test_the_form_starts_at_the_scenarios_own_kv_format_or_auto():
    assert dash.form_defaults(_kimi())["kv_dtype"] == "auto"          # kv_dtype left out
    awq = load_scenario(ROOT / "scenarios" / "awq_70b_one_gpu.yaml")
    assert dash.form_defaults(awq.raw())["kv_dtype"] == "fp8"         # the baseline's own
    assert dash.form_defaults(awq.raw("bf16-tp4"))["kv_dtype"] == "bf16"  # a variant's own


def test_kimi_nvfp4_runs_with_a_stated_kv_format_and_fp8_doubles_the_pool():
    with pytest.raises(TwinInputError) as err:      # auto: the checkpoint's KV format must be stated
        dash.run_scenario(_nvfp4("auto"))
    assert "\n" not in str(err.value) and str(err.value).startswith("deployment.kv_dtype: ")
    assert "give kv_dtype: fp8" in str(err.value)
    fp8, bf16 = dash.run_scenario(_nvfp4("fp8")), dash.run_scenario(_nvfp4("bf16"))
    assert fp8.metrics["completed"] == bf16.metrics["completed"] == 8
    ratio = fp8.info["kv_capacity_tokens"] / bf16.info["kv_capacity_tokens"]
    assert ratio == pytest.approx(2.0, rel=1e-3)   # half the bytes a token (the pool in whole blocks)


def test_the_what_if_writes_the_format_and_auto_leaves_it_out():
    awq = load_scenario(ROOT / "scenarios" / "awq_70b_one_gpu.yaml").raw()
    d = dash.form_defaults(awq)
    assert dash.apply_form(awq, dict(d), d) == awq                    # unchanged: the same scenario
    auto = dash.apply_form(awq, dict(d, kv_dtype="auto"), d)
    assert "kv_dtype" not in auto["deployment"] and awq["deployment"]["kv_dtype"] == "fp8"
    assert Scenario(auto).body().deployment.kv_dtype == "bf16"
    assert dash.describe_changes(d, dict(d, kv_dtype="auto")) == ["KV cache: fp8 → auto"]
    fp16 = dash.apply_form(awq, dict(d, kv_dtype="fp16"), d)
    assert fp16["deployment"]["kv_dtype"] == "fp16"


def test_a_prefill_decode_scenario_offers_the_kv_format_for_both_pools():
    from twin.deploy.pd_pools import POOLS, pool_body

    raw = load_scenario(ROOT / "scenarios" / "pd_disaggregation.yaml").raw("1p1d")
    d = dash.form_defaults(raw)
    assert d["kv_dtype"] == "auto"
    body = dash.validate(dash.apply_form(raw, dict(d, kv_dtype="fp8"), d))
    assert {pool_body(body, pool).deployment.kv_dtype for pool in POOLS} == {"fp8"}


def test_the_url_and_the_yaml_carry_the_kv_format():
    raw = _kimi()
    d = dash.form_defaults(raw)
    changes = {"model": "kimi-k2.5-nvfp4", "gpu": "B200", "kv_dtype": "fp8"}
    params = share.encode(KIMI, "baseline", 0, changes)
    assert params["w.kv_dtype"] == "fp8"
    assert share.decode(params, d) == changes
    whatif = dash.apply_form(raw, {**d, **changes}, d)
    text = share.scenario_yaml(whatif).decode()
    assert Scenario(parse_yaml(text, "whatif.yaml")).body().deployment.kv_dtype == "fp8"


def test_an_uploaded_scenarios_kv_format_is_the_forms_default():
    text = (ROOT / "scenarios" / "llama_3_1_70b_nvfp4_b300.yaml").read_bytes()
    scenario = dash.scenario_from_yaml(text, "mine.yaml")
    assert dash.form_defaults(scenario.raw())["kv_dtype"] == "fp8"
    raw = copy.deepcopy(scenario.raw())
    raw["deployment"]["kv_dtype"] = "fp4"
    with pytest.raises(TwinInputError, match=r"kv_dtype") as err:
        dash.validate(raw)
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------------------------- the page (AppTest)
def _page(params: dict[str, str]):
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.query_params.update(params)
    return at.run()


def test_the_page_runs_kimi_nvfp4_with_fp8_kv_from_a_shared_url():
    at = _page({"scenario": KIMI, "start": "baseline", "seed": "0", "w.model": "kimi-k2.5-nvfp4", "w.gpu": "B200",
                "w.kv_dtype": "fp8"})
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    found = [w for w in at.selectbox if w.key and w.key.endswith(":kv_dtype")]
    assert len(found) == 1 and found[0].value == "fp8"
    assert any("KV cache: auto → fp8" in m.value for m in at.markdown)
    assert at.query_params["w.kv_dtype"] == "fp8"


def test_a_bad_kv_format_in_the_url_is_one_error():
    at = _page({"scenario": KIMI, "start": "baseline", "w.kv_dtype": "fp7"})
    assert not at.exception
    assert [e.value for e in at.error] == ["What-if: URL parameter w.kv_dtype='fp7': setting kv_dtype takes one of auto, bf16, fp16, "
                                           "fp8, fp32"]
