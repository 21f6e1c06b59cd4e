"""A profile says where it was measured, and using it on another machine says so: one warning line naming
both machines (the library's ``ForeignProfileWarning``, the CLI's ``warning:`` line), and a validation whose
errors are large says they come from the machines, not from the twin."""

from __future__ import annotations

import json
import warnings

import pytest
from click.testing import CliRunner

from calibration.validate import Comparison
from twin.cli.main import main
from twin.cost.factory import build_cost_model
from twin.cost.profile import ForeignProfileWarning, foreign_machine, measured_on
from twin.hardware.host import cpu_name, same_device

TINY = {"name": "tiny-llama", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 8,
        "num_key_value_heads": 4, "head_dim": 32, "intermediate_size": 704, "vocab_size": 8192}
ELSEWHERE = "Some Other CPU @ 1.00GHz"


def profile(tmp_path, device_name: str, name: str = "p.json"):
    doc = {"format": "twin-profile", "version": 1, "model": dict(TINY), "dtype": "fp32",
           "device": {"type": "cpu", "name": device_name, "catalog_gpu": "CPU"},
           "environment": {"device_name": device_name, "cpu": device_name},
           "cost_model": {"coefficients": {"step": 2e-3, "seqs": 5e-5, "tokens": 4e-6}, "knee_tokens": 128}}
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_measured_on_and_the_message():
    doc = {"device": {"name": ELSEWHERE}}
    assert measured_on(doc) == ELSEWHERE
    assert measured_on({"environment": {"device_name": "old file"}}) == "old file"
    assert measured_on({}) is None
    msg = foreign_machine(doc, "AMD EPYC 7763", "p.json")
    assert msg is not None and "\n" not in msg
    assert f"measured on {ELSEWHERE!r}" in msg and "'AMD EPYC 7763'" in msg and "p.json" in msg
    assert "twin calibrate --quick" in msg
    assert foreign_machine(doc, " some other  cpu @ 1.00ghz", "p.json") is None   # same model, spacing and case
    assert foreign_machine({}, "AMD EPYC 7763") is None                            # says nothing: no claim
    assert same_device("A  b", "a B") and not same_device("a", None)


def test_a_foreign_cpu_profile_warns_once_naming_both_machines(tmp_path):
    path = profile(tmp_path, ELSEWHERE)
    with pytest.warns(ForeignProfileWarning) as rec:
        build_cost_model("profile", "tiny-llama", "CPU", params={"path": str(path)})
    assert len(rec) == 1
    msg = str(rec[0].message)
    assert ELSEWHERE in msg and cpu_name() in msg


def test_a_profile_from_this_cpu_does_not_warn(tmp_path):
    path = profile(tmp_path, cpu_name())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build_cost_model("profile", "tiny-llama", "CPU", params={"path": str(path)})


def test_the_cli_warns_in_one_line_and_runs(tmp_path):
    path = profile(tmp_path, ELSEWHERE)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"""
name: foreign
deployment: {{gpu: CPU, model: tiny-llama}}
server: {{max_model_len: 1024, max_num_seqs: 4, max_num_batched_tokens: 256}}
cost_model: {{kind: profile, profile: {path.name}}}
workload:
  arrivals: {{process: poisson, rate_per_s: 5}}
  num_requests: 10
  classes: [{{name: a, share: 1.0, prompt: {{suffix_tokens: 40}}, output_tokens: 8}}]
""")
    res = CliRunner().invoke(main, ["run", str(scenario), "-q"])
    assert res.exit_code == 0, res.output
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("warning: cost model profile") and ELSEWHERE in lines[0] and cpu_name() in lines[0]
    assert "Traceback" not in res.stderr and "warnings.warn" not in res.stderr


def test_large_validation_errors_are_put_down_to_the_machines():
    pytest.importorskip("torch")
    from calibration.validation_run import foreign_note

    machines = {"profile": ELSEWHERE, "engine": "AMD EPYC 7763"}
    big = Comparison(rows=[("request_throughput", 4.0, 4.6, 0.15), ("mean_tpot_ms", 20.0, 2.0, -0.9)])
    note = foreign_note(big, machines)
    assert note is not None and "-90% (mean_tpot_ms)" in note and ELSEWHERE in note and "AMD EPYC 7763" in note
    small = Comparison(rows=[("request_throughput", 4.0, 4.2, 0.05), ("mean_tpot_ms", 20.0, 18.0, -0.1)])
    assert foreign_note(small, machines) is None
