"""The client that measured a run, an input of its replay.

A client's TTFT runs from its own send stamp to the first streamed chunk it parses, so what one request costs
between the two ends (the client's HTTP stack and event loop, the network, the server's HTTP handling,
tokenisation and hand-off to the engine core, the first chunk's way back) belongs to the client, its host and
the server release together: the data here cannot split the client from the server. The twin's request path
(``request_path_s`` and its jitter, ``twin.sim.request_path``) is fitted on the runs of one client (the H100
inference-perf runs); naming the client of each run lets a fit give another client's runs their own value
(``request_path_s@client_<name>``, ``twin.fitting.scoped``), so that the runs of one client do not set another's.

What the two clients' paths are (issue 33, round 9, ``benchmarks/request_path_readings.py``; docs/fidelity.md
"Round 9: the bench client's per-request time"): on the silicon rows whose prompt step the twin prices well
(graphed 1k prompts at TP >= 4, CONC <= 8), the bench client's TTFT is the inference-perf path + 0-2.5 ms (gpt-oss
on B200 v0.15.1 +0.9 ms and H100 v0.18 +2.5 ms, MiniMax NVFP4 on v0.19 -0.4 ms), with no cost per TP rank and none
per prompt token the rows resolve (<= ~0.2 us). So a fitted ``request_path_s@client_vllm_bench`` of 13-22 ms is
not the client's: it is prompt-step time of some weight paths (MiniMax FP8 +12 ms, Kimi NVFP4 +19 ms) and eager
host floors that the fit parks on the only per-request term it has.

Facts (each client's public source):

* ``vllm-bench``: ``vllm bench serve`` / ``benchmarks/benchmark_serving.py`` and the InferenceX copy that measured
  the silicon rows (``utils/bench_serving``, run with ``--backend vllm``, i.e. ``/v1/completions``): one asyncio
  process, prompts built and tokenised before the run, TTFT stamped at the first SSE chunk that carries
  ``choices``; throughput = completed / (first send to last answer).
* ``inference-perf``: kubernetes-sigs/inference-perf: many worker processes (the runs here: 224) each with an
  asyncio loop and a connection pool; TTFT from the request's start time to its first token time (the runs here
  stamp about two stream messages per token); throughput = successes / (latest end - earliest start).
* ``aiperf``, ``guidellm``: their result files' readers (``twin.fitting.readers``).
"""

from __future__ import annotations

from twin.errors import TwinInputError

VLLM_BENCH = "vllm-bench"
INFERENCE_PERF = "inference-perf"
CLIENTS: tuple[str, ...] = (VLLM_BENCH, INFERENCE_PERF, "aiperf", "guidellm")
SCOPE_PREFIX = "client_"


def client_scope(client: str) -> str:
    """The fit scope of a client's runs: ``vllm-bench`` -> ``client_vllm_bench``."""
    return SCOPE_PREFIX + client.replace("-", "_")


CLIENT_SCOPES: tuple[str, ...] = tuple(client_scope(c) for c in CLIENTS)


def check_client(client: object, where: str) -> str | None:
    """``client`` if it names a known client (None: not known), else a one-line error naming ``where``."""
    if client is None or client in CLIENTS:
        return client
    raise TwinInputError(f"{where}: client = {client!r}: allowed {', '.join(CLIENTS)} (or none)")
