"""Mixed-GPU clusters declared in the scenario (``deployment.groups``): they run through ``twin run`` and
``twin compare`` on the cluster path, one group equals the plain deployment exactly, bad groups are one line
naming the field (exit 2), the per-replica table appears only with more than one replica, and the steps that
need one deployment say so in one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from twin.sim.run import metrics_of, resolve_for_run, run_body
from twin.sim.deployment import require_single_deployment, resolve_deployment
from twin.cli.main import main
from twin.sim.cluster import ClusterDeployment, per_replica_metrics, run_cluster
from twin.errors import TwinInputError
from twin.scenario import WEIGHTED_ROUTERS, Scenario, load_scenario

MIXED = """\
name: mixed
deployment:
  model: llama-3.1-8b
  router: least_outstanding
  groups:
    - {name: fast, gpu: H100-SXM, replicas: 2}
    - {name: slow, gpu: A100-SXM-80GB, replicas: 1, server: {max_num_seqs: 8}}
server: {max_model_len: 4096}
workload:
  arrivals: {process: poisson, rate_per_s: 30}
  num_requests: 90
  classes:
    - {name: a, share: 1.0, prompt: {shared_prefix_tokens: 512, suffix_tokens: {uniform: [50, 400]}},
       output_tokens: {uniform: [10, 60]}}
slo: {ttft_ms: {p99: 2000}}
seed: 2
variants:
  all-h100: {deployment: {groups: null, replicas: 3}}
"""


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def replica_rows(stdout: str) -> list[list[str]]:
    """The per-replica table's rows (plain Markdown when not on a terminal); of its first part when it is split
    to fit 80 columns (the later parts repeat the row number and carry the remaining columns)."""
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in stdout.splitlines()
            if re.match(r"^\|\s*\d+\s*\|", line)]
    seen: set[str] = set()
    first = []
    for row in rows:
        if row[0] in seen:
            break
        seen.add(row[0])
        first.append(row)
    return first


def assert_one_line_error(result, *needles: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output, result.stderr)
    err = result.stderr.strip()
    assert "\n" not in err and err.startswith("error: "), err
    assert "Traceback" not in result.output + result.stderr
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def plain(replicas: int = 3, **deployment) -> dict:
    data = {
        "name": "plain",
        "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b", "replicas": replicas,
                       "router": "least_outstanding", **deployment},
        "server": {"max_model_len": 4096, "max_num_seqs": 16},
        "workload": {"arrivals": {"process": "poisson", "rate_per_s": 40}, "num_requests": 80,
                     "classes": [{"name": "a", "share": 1.0,
                                  "prompt": {"shared_prefix_tokens": 256, "num_prefix_groups": 4,
                                             "suffix_tokens": {"uniform": [20, 300]}},
                                  "output_tokens": {"uniform": [5, 40]}}]},
        "slo": {"ttft_ms": 1000},
        "seed": 3,
    }
    return data


# ---- running ------------------------------------------------------------------------------------------------
def test_groups_scenario_runs_from_the_cli_with_both_gpus_per_replica(tmp_path):
    path = write(tmp_path, MIXED)
    out = tmp_path / "out.json"
    result = invoke("run", path, "-q", "--json", str(out))
    assert result.exit_code == 0, result.output + result.stderr
    text = result.stdout
    assert "3 replicas in 2 groups, least_outstanding router" in text
    assert re.search(r"fast: 2x1 H100-SXM, .*max_num_seqs=1024", text)
    assert re.search(r"slow: 1x1 A100-SXM-80GB, .*max_num_seqs=8\b", text)
    assert "load imbalance" in text
    rows = replica_rows(text)
    assert [r[0] for r in rows] == ["0", "1", "2"]
    assert [r[1] for r in rows] == ["fast · H100-SXM", "fast · H100-SXM", "slow · A100-SXM-80GB"]
    assert sum(int(r[2].replace(",", "")) for r in rows) == 90
    doc = json.loads(out.read_text())
    groups = doc["twin"]["config"]["replica_groups"]
    assert [g["gpu"] for g in groups] == ["H100-SXM", "A100-SXM-80GB"]
    assert [g["replicas"] for g in groups] == [[0, 1], [2]]
    assert doc["completed"] == 90


def test_compare_runs_the_cluster_beside_a_plain_variant(tmp_path):
    path = write(tmp_path, MIXED)
    result = invoke("compare", path, "-q")
    assert result.exit_code == 0, result.output + result.stderr
    assert "all-h100: llama-3.1-8b on 3x1 H100-SXM" in result.stdout
    assert "baseline: llama-3.1-8b on 3 replicas in 2 groups" in result.stdout
    assert replica_rows(result.stdout) == []  # a comparison has no per-replica table


def test_bundled_mixed_variant_runs_as_is():
    result = invoke("run", "cluster_prefix_affinity", "-v", "mixed-h100-a100", "-q",
                    "--set", "workload.duration_s=10")
    assert result.exit_code == 0, result.output + result.stderr
    labels = {r[1] for r in replica_rows(result.stdout)}
    assert labels == {"h100 · H100-SXM", "a100 · A100-SXM-80GB"}


def test_one_group_equals_the_plain_deployment_exactly():
    base = Scenario(plain()).body()
    reference = run_body(base)
    expected = metrics_of(reference, base)
    for groups, replicas in (([{"gpu": "H100-SXM", "replicas": 3}], None),  # all given in the group
                             ([{}], 3),                                     # all from the deployment
                             ([{"name": "only", "replicas": 3, "weight": 2.0}], None)):
        data = plain(**{"groups": groups})
        if replicas is None:
            del data["deployment"]["replicas"]
        body = Scenario(data).body()
        assert body.deployment.replicas == 3
        result = run_body(body)
        assert metrics_of(result, body) == expected, groups
        assert [(r.replica, r.first_token_s) for r in result.requests] == \
               [(r.replica, r.first_token_s) for r in reference.requests]


def test_run_body_delegates_to_the_cluster_path():
    body = Scenario(plain(groups=[{"gpu": "H100-SXM", "replicas": 2},
                                  {"gpu": "A100-SXM-80GB", "server": {"max_num_seqs": 4}}],
                          replicas=1)).body()
    # the deployment's replicas is the default of the group that leaves it out, then the total
    assert [g.replicas for g in body.deployment.groups] == [2, 1]
    assert body.deployment.replicas == 3
    assert [g.tensor_parallel_size for g in body.deployment.groups] == [1, 1]
    # validated once, a dump validates to the same body (every group complete, replicas the total)
    assert type(body).model_validate(body.model_dump()) == body
    cluster = resolve_for_run(body)
    assert isinstance(cluster, ClusterDeployment) and cluster.owner == [0, 0, 1]
    assert cluster.deployments[1].scheduler_config.max_num_seqs == 4
    a, b = run_body(body), run_body(body, deployment=cluster)
    c = run_cluster(body)
    assert metrics_of(a, body) == metrics_of(b, body) == metrics_of(c, body)
    rows = per_replica_metrics(a)
    assert [r["gpu"] for r in rows] == ["H100-SXM", "H100-SXM", "A100-SXM-80GB"]
    assert sum(r["num_requests"] for r in rows) == 80
    with pytest.raises(TwinInputError, match=r"^deployment\.groups: this step needs one deployment"):
        resolve_deployment(body)


def test_weighted_routers_match_the_routing_module():
    from twin.sim.routing import _PARAMS, ROUTERS

    assert WEIGHTED_ROUTERS == tuple(n for n in ROUTERS if "weights" in _PARAMS[n])


# ---- bad groups -----------------------------------------------------------------------------------------------
def mixed_with(old: str, new: str) -> str:
    assert old in MIXED, old
    return MIXED.replace(old, new)


BAD_GROUPS = {
    "unknown-key": (mixed_with("replicas: 2}", "replicas: 2, bogus: 1}"),
                    ["deployment.groups[0]", "unknown field 'bogus'"]),
    "model-in-a-group": (mixed_with("replicas: 2}", "replicas: 2, model: llama-3.1-70b}"),
                         ["deployment.groups[0].model", "shares deployment.model"]),
    "zero-replicas": (mixed_with("replicas: 1,", "replicas: 0,"), ["deployment.groups[1].replicas", ">= 1"]),
    "replicas-contradict": (mixed_with("router: least_outstanding", "router: least_outstanding\n  replicas: 4"),
                            ["deployment.replicas", "contradicts deployment.groups", "2 + 1 = 3"]),
    "duplicate-names": (mixed_with("name: slow", "name: fast"), ["deployment.groups[1].name", "'fast'"]),
    "weight-unused": (mixed_with("router: least_outstanding", "router: least_kv_usage").replace(
        "replicas: 2}", "replicas: 2, weight: 2}"), ["deployment.groups[0].weight", "least_kv_usage"]),
    "bad-group-server": (mixed_with("max_num_seqs: 8", "max_num_seqs: 0"),
                         ["deployment.groups[1].server.max_num_seqs", ">= 1"]),
    "unknown-group-server-key": (mixed_with("max_num_seqs: 8", "max_num_seq: 8"),
                                 ["deployment.groups[1].server", "'max_num_seq'"]),
    "unknown-gpu": (mixed_with("gpu: A100-SXM-80GB", "gpu: Z80"), ["deployment.groups[1] (slow)", "Z80"]),
    "bad-tp": (mixed_with("gpu: A100-SXM-80GB,", "gpu: A100-SXM-80GB, tensor_parallel_size: 3,"),
               ["deployment.groups[1] (slow)", "tensor_parallel_size"]),
    "empty": (re.sub(r"  groups:\n(    - .*\n)+", "  groups: []\n", MIXED), ["deployment.groups", "at least one"]),
    "not-a-list": (re.sub(r"  groups:\n(    - .*\n)+", "  groups: {gpu: H100-SXM}\n", MIXED),
                   ["deployment.groups", "list"]),
    "bad-in-variant": (mixed_with("all-h100: {deployment: {groups: null, replicas: 3}}",
                                  "two: {deployment: {groups: [{gpu: H100-SXM, replicas: -1}]}}"),
                       ["[variant two]", "deployment.groups[0].replicas"]),
}


@pytest.mark.parametrize("case", list(BAD_GROUPS))
def test_bad_groups_are_one_line_naming_the_field(tmp_path, case):
    text, needles = BAD_GROUPS[case]
    result = invoke("run", write(tmp_path, text), "--all-variants", "-q")
    assert_one_line_error(result, *needles)
    assert result.stdout == ""


def test_set_replicas_against_counted_groups_is_a_contradiction(tmp_path):
    path = write(tmp_path, MIXED)
    assert_one_line_error(invoke("run", path, "-q", "--set", "deployment.replicas=8"), "deployment.replicas: 8",
                          "contradicts")
    # the total itself is fine
    assert invoke("run", path, "-q", "--set", "deployment.replicas=3", "--set", "workload.num_requests=9") \
        .exit_code == 0


# ---- the per-replica table ------------------------------------------------------------------------------------
@pytest.mark.parametrize("deployment, expected_rows", [
    ({"replicas": 1}, 0),
    ({"replicas": 2}, 2),
    ({"groups": [{"gpu": "H100-SXM", "replicas": 1}]}, 0),
    ({"groups": [{"gpu": "H100-SXM", "replicas": 1}, {"gpu": "A100-SXM-80GB", "replicas": 1}]}, 2),
])
def test_per_replica_table_only_with_more_than_one_replica(tmp_path, deployment, expected_rows):
    import yaml

    data = plain()
    data["deployment"].pop("replicas")
    data["deployment"].update(deployment)
    data["workload"]["num_requests"] = 20
    result = invoke("run", write(tmp_path, yaml.safe_dump(data)), "-q")
    assert result.exit_code == 0, result.output + result.stderr
    assert len(replica_rows(result.stdout)) == expected_rows
    assert ("load imbalance" in result.stdout) == (expected_rows > 0)


# ---- steps that need one deployment ---------------------------------------------------------------------------
@pytest.mark.parametrize("args, needle", [
    (["validate"], "twin validate"),
    (["protocol", "--replications", "1"], "twin protocol"),
], ids=["validate", "protocol"])
def test_single_deployment_commands_refuse_groups_in_one_line(tmp_path, args, needle):
    path = write(tmp_path, MIXED)
    assert_one_line_error(invoke(args[0], path, *args[1:]), "deployment.groups:", needle,
                          "needs one deployment")


def test_dashboard_and_planner_refuse_groups():
    import yaml

    from twin.dashboard import state as dash
    from twin.plan.evaluate import Criteria
    from twin.plan.plan_spec import PlanSpec

    data = yaml.safe_load(MIXED)
    data.pop("variants")
    with pytest.raises(TwinInputError, match=r"^deployment\.groups: the dashboard needs one deployment"):
        dash.validate(data)
    with pytest.raises(TwinInputError, match=r"^deployment\.groups: twin plan"):
        PlanSpec(data, Criteria({"ttft_ms": {"p99": 1000}}))
    with pytest.raises(TwinInputError, match="validation"):
        body = Scenario(data).body()
        require_single_deployment(body, "validation")
    # the page does not offer a mixed-cluster variant as a starting point
    points = dash.start_points(load_scenario("cluster_prefix_affinity"))
    assert "mixed-h100-a100" not in points and "prefix-affinity" in points
