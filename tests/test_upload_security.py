"""The dashboard's upload path refuses every way an uploaded scenario could make the server read one of its
files: ``!!binary`` (bytes that pydantic would turn into a path) in each file-naming field, any other YAML
tag, and relative paths that would be opened from the server's working directory. Each case goes through
``scenario_from_yaml``, the function the sidebar hands an uploaded file to, with every ``open`` recorded:
the case must end in a one-line ``TwinInputError`` and no file named by the upload may have been opened."""

from __future__ import annotations

import base64
import builtins
import io
import os
from pathlib import Path

import pytest

from twin.dashboard import state as dash
from twin.dashboard.upload_paths import check_scenario_paths
from twin.errors import TwinInputError
from twin.scenario import Scenario

WL = ("workload: {arrivals: {process: poisson, rate_per_s: 4}, num_requests: 5, classes: [{name: a, share: 1, prompt: {suffix_tokens: 8}, output_tokens: 4}]}\n")
WL_DATA = {"arrivals": {"process": "poisson", "rate_per_s": 4}, "num_requests": 5, "classes": [{"name": "a", "share": 1, "prompt": {"suffix_tokens": 8}, "output_tokens": 4}]}
SECRET_FILES = (".git/config", ".streamlit/secrets.toml", "README.md", "x", "model/config.json", "gpu.yaml",
                "profile.json", "secret")


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.fixture
def server_cwd(tmp_path, monkeypatch):
    """A working directory holding the kind of files a server has (a git config, Streamlit secrets, ...)."""
    for name in SECRET_FILES:
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text('{"hidden_size": 1}\n' if name.endswith(".json") else "SECRET=1\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def opened(monkeypatch):
    """Every path opened (builtins.open, io.open, os.open) while the test runs."""
    seen: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def rec_open(file, *a, **k):
        if isinstance(file, (str, bytes, os.PathLike)):
            seen.append(os.fsdecode(file))
        return real_open(file, *a, **k)

    def rec_os_open(path, *a, **k):
        seen.append(os.fsdecode(path))
        return real_os_open(path, *a, **k)

    monkeypatch.setattr(builtins, "open", rec_open)
    monkeypatch.setattr(io, "open", rec_open)
    monkeypatch.setattr(os, "open", rec_os_open)
    return seen


BINARY_TARGETS = ("/etc/passwd", "/proc/self/environ", ".git/config", ".streamlit/secrets.toml")
BINARY_FIELDS = [
    "workload: {{trace: {{path: !!binary {b}}}}}\n",
    "deployment: {{gpu: !!binary {b}}}\n" + WL,
    "deployment: {{model: !!binary {b}}}\n" + WL,
    "cost_model: {{kind: profile, profile: !!binary {b}}}\n" + WL,
    "speculative_decoding: {{method: draft_model, draft_model: !!binary {b}, num_speculative_tokens: 2}}\n" + WL,
    WL + "variants: {{v: {{workload: {{trace: {{path: !!binary {b}}}}}}}}}\n",
]
OTHER_TAGS = [
    "workload: {trace: {path: !!str /etc/passwd}}\n",
    "deployment: {model: !!str .git/config}\n" + WL,
    "workload: {trace: {path: ! .git/config}}\n",
    "workload: {trace: {path: !local .git/config}}\n",
    "workload: {trace: !!map {path: .git/config}}\n",
    "workload: {trace: {path: !!python/name:os.system ''}}\n",
    "deployment: {gpu: !!set {a}}\n" + WL,
    "workload: {num_requests: !!int 5, classes: []}\n",
    "deployment: {model: !!timestamp 2020-01-01}\n" + WL,
    "--- !!map\n" + WL,
]
RELATIVE = [
    ("deployment: {model: .git/config}\n" + WL, "deployment.model"),
    ("deployment: {gpu: .streamlit/secrets.toml}\n" + WL, "deployment.gpu"),
    ("cost_model: {kind: profile, profile: .streamlit/secrets.toml}\n" + WL, "cost_model.profile"),
    ("workload: {trace: {path: .git/config}}\n", "workload.trace.path"),
    ("workload: {trace: {path: ../x}}\n", "workload.trace.path"),
    ("deployment: {model: ../../../../../../etc/passwd}\n" + WL, "deployment.model"),
    ("deployment: {model: model}\n" + WL, "deployment.model"),
    ("deployment: {gpu: README.md}\n" + WL, "deployment.gpu"),
    ("deployment: {gpu: gpu.yaml}\n" + WL, "deployment.gpu"),
    ("cost_model: {kind: profile, profile: profile.json}\n" + WL, "cost_model.profile"),
    ("cost_model: {kind: profile, profile: secret}\n" + WL, "cost_model.profile"),
    ("deployment: {groups: [{gpu: .git/config}]}\n" + WL, "deployment.groups.0.gpu"),
    ("speculative_decoding: {method: draft_model, draft_model: model/config.json, num_speculative_tokens: 2}\n"
     + WL, "speculative_decoding.draft_model"),
    (WL + "variants: {v: {deployment: {model: .git/config}}}\n", "variants.v.deployment.model"),
    ("workload:\n  num_requests: 5\n  classes:\n  - {name: a, output_tokens: 4,\n"
     "     prompt: {suffix_tokens: {empirical: {path: .git/config, column: c}}}}\n", "workload.classes.0"),
    ("p: &p .git/config\nworkload: {trace: {path: *p}}\n", "workload.trace.path"),
]


def _no_secret_opened(opened: list[str], cwd: Path) -> None:
    secrets = {str((cwd / name).resolve()) for name in SECRET_FILES} | {"/etc/passwd", "/proc/self/environ"}
    touched = [p for p in opened if str(Path(p).resolve()) in secrets or not Path(p).is_absolute()]
    assert touched == [], f"opened {touched}"


@pytest.mark.parametrize("template", BINARY_FIELDS)
@pytest.mark.parametrize("target", BINARY_TARGETS)
def test_a_binary_path_is_refused_before_any_file_is_opened(template, target, server_cwd, opened):
    text = template.replace("{{", "\x01").replace("}}", "\x02").replace("{b}", b64(target))
    text = text.replace("\x01", "{").replace("\x02", "}")
    with pytest.raises(TwinInputError) as err:
        dash.scenario_from_yaml(text.encode(), "up.yaml")
    msg = str(err.value)
    assert msg.startswith("up.yaml:") and "the YAML tag '!!binary' is not allowed" in msg and "\n" not in msg
    _no_secret_opened(opened, server_cwd)


@pytest.mark.parametrize("text", OTHER_TAGS)
def test_every_other_yaml_tag_is_refused(text, server_cwd, opened):
    with pytest.raises(TwinInputError) as err:
        dash.scenario_from_yaml(text, "up.yaml")
    assert "is not allowed here" in str(err.value) and "YAML tag" in str(err.value)
    _no_secret_opened(opened, server_cwd)


@pytest.mark.parametrize("text, field", RELATIVE)
def test_a_relative_path_outside_the_upload_folder_is_refused(text, field, server_cwd, opened):
    with pytest.raises(TwinInputError) as err:
        dash.scenario_from_yaml(text, "up.yaml")
    msg = str(err.value)
    assert msg.startswith(f"up.yaml: {field}") and "\n" not in msg, msg
    _no_secret_opened(opened, server_cwd)


def test_a_relative_path_to_an_upload_becomes_its_absolute_location(server_cwd, opened):
    up = dash.save_upload(b"prompt_tokens,output_tokens\n10,5\n", "lengths.csv")
    sc = dash.scenario_from_yaml(f"workload: {{trace: {{path: {up.name}}}}}\n", "up.yaml")
    assert sc.raw()["workload"]["trace"]["path"] == str(up.resolve())
    # a bundled profile by name becomes its file (not a file of that name in the working directory)
    (server_cwd / "tiny-llama-cpu.json").write_text("{}")
    sc = dash.scenario_from_yaml("cost_model: {kind: profile, profile: tiny-llama-cpu}\n" + WL, "up.yaml")
    profile = Path(sc.raw()["cost_model"]["profile"])
    assert profile.is_absolute() and profile.parent.name == "profiles" and profile.name == "tiny-llama-cpu.json"
    _no_secret_opened(opened, server_cwd)


def test_the_validated_scenario_is_checked_after_type_coercion(server_cwd, opened):
    """pydantic turns bytes into text: a scenario that reached validation with bytes in a file-naming field
    (not through the YAML, which refuses tags) is still refused by the check on the validated fields."""
    for data, field in [({"workload": {"trace": {"path": b"/etc/passwd"}}}, "workload.trace.path"),
                        ({"deployment": {"model": b".git/config"}, "workload": WL_DATA},
                         "deployment.model"),
                        ({"cost_model": {"kind": "profile", "profile": b"secret"}, "workload": WL_DATA},
                         "cost_model.profile"),
                        ({"workload": WL_DATA, "variants": {"v": {"deployment": {"gpu": "x/g.yaml"}}}},
                         "variants.v.deployment.gpu")]:
        sc = Scenario(data, source="up.yaml")
        with pytest.raises(TwinInputError) as err:
            check_scenario_paths(sc, "up.yaml")
        assert str(err.value).startswith(f"up.yaml: {field}"), str(err.value)
    _no_secret_opened(opened, server_cwd)


def test_catalog_names_bundled_traces_and_uploads_still_load():
    sc = dash.scenario_from_yaml("deployment: {gpu: H100-SXM, model: llama-3.1-8b}\n"
                                 "workload: {trace: {path: '{traces}/azure_llm_2023_conv.csv'}}\n", "up.yaml")
    assert sc.raw()["workload"]["trace"]["path"] == "{traces}/azure_llm_2023_conv.csv"
    assert sc.raw()["deployment"] == {"gpu": "H100-SXM", "model": "llama-3.1-8b"}
