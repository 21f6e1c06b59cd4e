"""Names a user types: a mistyped scenario, variant, GPU, model or reference gets one line with a "did you
mean"; `twin compare --reference` compares every run against the one named."""

from __future__ import annotations

from click.testing import CliRunner

from twin.cli.main import main
from twin.errors import did_you_mean


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def _one_line_error(result, *needles: str) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def test_did_you_mean_exact():
    assert did_you_mean("concurency_cap_trap", ["concurrency_cap_trap", "chat_shared_prompt"]) == \
        "; did you mean 'concurrency_cap_trap'?"
    assert did_you_mean("H100-SMX", ["H100-SXM", "H200-SXM", "L4"]) == "; did you mean 'H100-SXM' or 'H200-SXM'?"
    assert did_you_mean("eagle_c16", ["eagle-c16", "mtp-c16"]) == "; did you mean 'eagle-c16'?"  # _ as -
    assert did_you_mean("zzzz", ["concurrency_cap_trap"]) == ""


def test_mistyped_names_get_a_suggestion():
    line = _one_line_error(_invoke("run", "concurency_cap_trap"), "did you mean 'concurrency_cap_trap'?",
                           "twin list scenarios")
    assert "chat_shared_prompt" not in line        # one suggestion, not every bundled name
    _one_line_error(_invoke("run", "concurrency_cap_trap", "-v", "vllm-defualt"), "did you mean 'vllm-default'?")
    _one_line_error(_invoke("run", "concurrency_cap_trap", "--set", "deployment.gpu=H100-SMX"),
                    "did you mean 'H100-SXM'")
    _one_line_error(_invoke("run", "concurrency_cap_trap", "--set", "deployment.model=llama-3.1-8", "-q"),
                    "did you mean 'llama-3.1-8b'")
    _one_line_error(_invoke("compare", "concurrency_cap_trap", "--reference", "vllm-defalt"),
                    "--reference 'vllm-defalt'", "did you mean 'vllm-default'?")


def test_compare_against_a_named_reference():
    r = _invoke("compare", "concurrency_cap_trap", "--reference", "vllm-default", "-q")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith("vllm-default: llama-3.1-8b on 1x1 H100-SXM")
    assert "(reference)" in r.stdout and "| metric" in r.stdout and "baseline: max_num_seqs=4" in r.stdout
    assert max(map(len, lines)) <= 80
