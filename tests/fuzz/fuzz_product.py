"""Fuzz cases for the twin's own file readers given a hostile file where they expect theirs, and for the
options of its commands given hostile values (round 19).

``file_cases``: every file a command reads (a scenario, a price file, a plan file, a profile given with
``--profile``, a trace given with ``--trace``, a result file to diagnose or to calibrate from) replaced by an
empty, binary, non-UTF-8, BOM-only or NUL-carrying file, nesting 100,000 deep, a YAML alias bomb, a key given
twice, a list or a number where a mapping belongs, a folder, a missing file, a symbolic-link loop or a link to
``/dev/zero`` (a device that never ends); since round 21 also a named pipe nothing writes to, a 2 GiB sparse
file of NUL bytes and UTF-16 text with a NUL, and the readers of trace files, inference-perf folders (a config
or a stage file replaced), ``calibrate --acceptance`` and ``validate --bench-json``. Every one must be refused
in one line (a pipe with a writer is read up to the size limit; one without is refused after
``twin.yaml_input.PIPE_WAIT_S``).

``option_cases``: an option given NaN, an infinity, a value outside its range, a duplicate, an empty list, a
``--set`` / ``--grid`` value nested 3,000 deep, holding a key twice or an alias bomb, a name that is not a
metric or a column, an option that does not apply in the command's mode, an output path that
is a folder, a missing folder or a symbolic-link loop. Every one must be refused in one line before any work."""

from __future__ import annotations

import json

import yaml
from hypothesis import strategies as st

from fuzz_scenarios import BASE_SCENARIO
from fuzz_results import _stage_folder, calibrate_args
from fuzz_values import DIR, FIFO, LOOP, SPARSE_2G, Case, link

DEEP = 100_000
SCENARIO = yaml.safe_dump(BASE_SCENARIO).encode()

# each hostile content: (bytes or a special entry, whether it stays a well-formed document of the wrong shape)
HOSTILE = {
    "empty": b"",
    "binary": bytes(range(256)) * 4,
    "not-utf8": b"name: caf\xe9\n",
    "bom-only": b"\xef\xbb\xbf",
    "nul": b"name: a\x00b\n",
    "deep-json": b"[" * DEEP + b"]" * DEEP,
    "deep-yaml": b"a: " + b"[" * DEEP,
    "alias-bomb": b"a: &a [x,x,x,x,x,x,x,x,x]\n" + b"".join(
        b"%s: &%s [%s]\n" % (k.encode(), k.encode(), b",".join([b"*" + p.encode()] * 9))
        for p, k in zip("abcdef", "bcdefg")),
    "list": b"- 1\n- 2\n",
    "number": b"42\n",
    "folder": DIR,
    "missing": None,
    "link-loop": LOOP,
    "dev-zero": link("/dev/zero"),
    "fifo": FIFO,
    "sparse-2g": SPARSE_2G,
    "utf16-nul": "name: a\x00b\n".encode("utf-16"),
}
# a key given twice, in each file's own language
DUPLICATE = {"yaml": b"seed: 1\nseed: 2\n" + SCENARIO, "prices": b"H100-SXM: 2.0\nH100-SXM: 3.0\n",
             "json": b'{"format": "twin-profile", "format": "twin-profile"}'}

# (surface, command line, the hostile file's name, its language for a duplicate key)
FILE_SURFACES = [
    ("scenario", ["run", "{d}/x.yaml", "-q"], "x.yaml", "yaml"),
    ("price-file", ["sweep", "{d}/s.yaml", "--grid", "server.max_num_seqs=4", "--backend", "serial", "-q",
                    "--prices", "{d}/p.yaml"], "p.yaml", "prices"),
    ("plan-file", ["plan", "{d}/x.yaml", "--backend", "serial", "-q"], "x.yaml", "yaml"),
    ("validate-profile", ["validate", "{d}/s.yaml", "--profile", "{d}/p.json", "--bench-json", "{d}/b.json"],
     "p.json", "json"),
    ("protocol-trace", ["protocol", "{d}/s.yaml", "--trace", "{d}/t.csv", "-q", "--replications", "1"], "t.csv",
     None),
    ("diagnose-results", ["diagnose", "{d}/r.json", "--scenario", "{d}/s.yaml"], "r.json", "json"),
    ("calibrate-results", ["calibrate", "--from-results", "{d}/r.json", "--gpu", "H100-SXM", "--model",
                           "llama-3.1-8b", "-o", "{d}/o.json", "-q", "--max-sim-s", "10"], "r.json", "json"),
]
STAGES = _stage_folder()
STAGE_NAME = next(n for n in STAGES if "stage_0" in n)


def _trace_scenario(name: str, fmt: str) -> bytes:
    return yaml.safe_dump({**BASE_SCENARIO, "workload": {"trace": {"path": name, "format": fmt}}}).encode()


# surfaces added in round 21: (surface, command line, the hostile file's name, its language), the files beside
# it, and the kinds its reader may accept (an inference-perf folder need not hold a config)
MORE_SURFACES = [
    (("trace-csv", ["run", "{d}/s.yaml", "-q"], "t.csv", None), {"s.yaml": _trace_scenario("t.csv", "azure")}, ()),
    (("trace-jsonl", ["run", "{d}/s.yaml", "-q"], "t.jsonl", None),
     {"s.yaml": _trace_scenario("t.jsonl", "mooncake")}, ()),
    (("inference-perf-config", calibrate_args("{d}/res"), "res/exp-config.yaml", "yaml"),
     {**STAGES, "out/.keep": b""}, ("missing",)),
    (("inference-perf-stage", calibrate_args("{d}/res"), STAGE_NAME, "json"), {**STAGES, "out/.keep": b""}, ()),
    (("acceptance", ["calibrate", "--acceptance", "{d}/a.txt"], "a.txt", "json"), {}, ()),
    (("validate-bench", ["validate", "{d}/s.yaml", "--bench-json", "{d}/r.json"], "r.json", "json"), {}, ()),
]
BENCH = json.dumps({"input_lens": [10, 20], "output_lens": [4, 4], "ttfts": [0.01, 0.02],
                    "latencies": [0.05, 0.06], "start_times": [0.0, 0.1]}).encode()


@st.composite
def file_cases(draw) -> Case:
    (surface, args, name, language), beside, accepted = draw(st.sampled_from(
        [(s, {}, ()) for s in FILE_SURFACES] + MORE_SURFACES))
    kinds = [k for k in sorted(HOSTILE) + (["duplicate-key"] if language else []) if k not in accepted]
    kind = draw(st.sampled_from(kinds))
    files = {"s.yaml": SCENARIO, "b.json": BENCH, **beside}
    files.pop(name, None)
    content = DUPLICATE[language] if kind == "duplicate-key" else HOSTILE[kind]
    if content is not None:
        files[name] = content
    case = Case(f"file-{surface}", args, files)
    case.refuse(f"{name} is {kind}")
    return case


# (category, command line, why it must be refused); {d}/dir is a folder, {d}/loop a symbolic-link loop
SWEEP = ["sweep", "{d}/s.yaml", "--grid", "server.max_num_seqs=4", "--backend", "serial", "-q"]
PLAN = ["plan", "{d}/s.yaml", "--backend", "serial", "-q", "--search", "server.max_num_seqs=8",
        "--max-replicas", "2", "--target-rate", "5"]
DIAGNOSE = ["diagnose", "{d}/b.json", "--scenario", "{d}/s.yaml"]
PROTOCOL = ["protocol", "{d}/s.yaml", "-q", "--replications", "1"]
CALIBRATE = ["calibrate", "--quick", "-q", "-o", "{d}/o.json"]
RESULTS = ["calibrate", "--from-results", "{d}/b.json", "--gpu", "H100-SXM", "-m", "llama-3.1-8b", "-q"]
OPTION_CASES = [
    ("output", ["run", "{d}/s.yaml", "-q", "--json", "{d}/loop"], "an output path that is a link loop"),
    ("output", ["run", "{d}/s.yaml", "-q", "--steps-out", "{d}/no/x.csv"], "an output folder that is missing"),
    ("output", ["compare", "{d}/s.yaml", "-q", "--json", "{d}/dir"], "an output path that is a folder"),
    ("output", [*PLAN, "--plot", "{d}/loop"], "an output path that is a link loop"),
    ("output", [*RESULTS, "-o", "{d}/loop"], "an output path that is a link loop"),
    ("output", [*CALIBRATE[:-2], "-o", "{d}/loop"], "an output path that is a link loop"),
    ("variants", ["compare", "{d}/s.yaml", "-q", "--variants", ","], "a list naming no variant"),
    ("variants", ["run", "{d}/s.yaml", "-q", "--all-variants", "-v", "big"], "-v beside --all-variants"),
    ("sweep", [*SWEEP, "--color", "bogus", "--plot", "{d}/p.html"], "a colour that is not a column"),
    ("sweep", [*SWEEP, "--y", "p99_ttft_ms"], "--y without --plot"),
    ("sweep", [*SWEEP, "--trials", "3"], "--trials without --search optuna"),
    ("sweep", [*SWEEP, "--search", "optuna", "--objective", "bogus"], "an objective that is not a metric"),
    ("sweep", [*SWEEP, "--goodput", "nan"], "NaN"),
    ("prices", [*SWEEP, "--price", "H100-SXM=nan"], "NaN"),
    ("prices", [*SWEEP, "--price", "H100-SXM=-1"], "a negative price"),
    ("prices", [*SWEEP, "--price", "H100-SXM=1", "--price", "H100-SXM=2"], "a GPU priced twice"),
    ("plan", [*PLAN, "--latency-metric", "bogus"], "a latency axis that is not a metric"),
    ("plan", [*PLAN, "--target-rate", "inf"], "an infinity"),
    ("plan", [*PLAN, "--rel-tol", "nan"], "NaN"),
    ("diagnose", [*DIAGNOSE, "--hit-rate", "nan"], "NaN"),
    ("diagnose", [*DIAGNOSE, "--candidates", "4,4"], "a candidate given twice"),
    ("diagnose", [*DIAGNOSE, "--candidates", ","], "an empty candidate"),
    ("diagnose", [*DIAGNOSE, "--shared-prefix-tokens", "1000000"], "a prefix no prompt is longer than"),
    ("diagnose", ["diagnose", "{d}/b.json", "--candidates", "4"], "--candidates without --scenario"),
    ("protocol", [*PROTOCOL, "--engine-duration", "nan"], "NaN"),
    ("protocol", [*PROTOCOL, "--spec-concurrency", "4,4"], "a concurrency given twice"),
    ("protocol", [*PROTOCOL, "--trace", "{d}/loop"], "a trace that is a link loop"),
    ("calibrate", [*CALIBRATE, "--budget", "nan"], "NaN (a budget that never runs out)"),
    ("calibrate", [*CALIBRATE, "--budget", "inf"], "an infinity (a budget that never runs out)"),
    ("calibrate", [*CALIBRATE, "--max-pool-gib", "nan"], "NaN"),
    ("calibrate", [*RESULTS, "-o", "{d}/o.json", "--max-sim-s", "nan"], "NaN"),
    ("validate", ["validate", "{d}/s.yaml", "--bench-json", "{d}/b.json", "--device", "cuda"],
     "--device without an engine run"),
    ("validate", ["validate", "{d}/s.yaml", "--device", "tpu"], "a device that is not cpu or cuda"),
    ("values", ["run", "{d}/s.yaml", "-q", "--set", "server.max_num_seqs=" + "[" * 3000], "a value 3000 deep"),
    ("values", [*SWEEP[:3], "server.max_num_seqs=" + "[" * 3000, *SWEEP[4:]], "a value 3000 deep"),
    ("values", ["run", "{d}/s.yaml", "-q", "--set", "server={max_num_seqs: 4, max_num_seqs: 8}"],
     "a key given twice"),
    ("values", ["run", "{d}/s.yaml", "-q", "--set", "workload.classes=[&a [x,x,x,x,x,x,x,x,x], " + ", ".join(
        f"&{k} [{', '.join(['*' + p] * 9)}]" for p, k in zip("abcdef", "bcdefg")) + "]"], "an alias bomb"),
]


@st.composite
def option_cases(draw) -> Case:
    category, args, why = draw(st.sampled_from(OPTION_CASES))
    case = Case(f"option-{category}", list(args), {"s.yaml": SCENARIO, "b.json": BENCH, "dir": DIR, "loop": LOOP})
    case.refuse(why)
    return case
