"""The bench client's own per-request time, timed on this CPU against a stub server (issue 33, round 14).

A stated prior for the client part of ``request_path_s@client_vllm_bench`` that is read off no row: vLLM's own bench
client request function (``vllm.benchmarks.lib.endpoint_request_func.async_request_openai_completions``, the
function ``vllm bench serve --backend vllm`` awaits per request: one ``aiohttp`` POST to ``/v1/completions`` with
``stream: true``, then per SSE chunk its buffered message splitter and one ``json.loads``) is loaded from an
installed vLLM wheel and driven against a local stub server that answers like vLLM's completions endpoint but does
no model work: it parses the request body, sends the first chunk at once, then ``--osl`` - 1 token chunks
``--tpot-ms`` apart, a usage chunk and ``[DONE]``. So the TTFT the client stamps is the floor of the path with no
engine in it: the client's request build and send, loopback TCP, the stub's HTTP parse of the prompt, the first
chunk back and the client's parse of it. Under concurrency C the client's one event loop also parses the other C - 1
streams' chunks, which can delay a request's first-chunk stamp: that is measured too.

Printed per (prompt tokens, concurrency): median and mean client TTFT (ms), and the client process's CPU time per
request and per chunk (``time.process_time``; less sensitive than wall time to other load on the machine).

Needs ``aiohttp``, ``regex``, ``tqdm`` and a vLLM wheel installed without its dependencies in a separate venv
(the module is loaded from its file, so vLLM's package ``__init__`` and torch are not imported):

    python -m venv .venv-extra && .venv-extra/bin/pip install aiohttp regex tqdm && \
        .venv-extra/bin/pip install --no-deps vllm==0.15.1
    .venv-extra/bin/python benchmarks/bench_client_path.py [--conc 1,16,64] [--isl 1024,8192] [--osl 64]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import bounded, check_out_path, nonneg_float, nonneg_int, positive_int  # noqa: E402
from twin.errors import run_script  # noqa: E402

CHARS_PER_TOKEN = 4      # the prompt is text (the bench's random prompts are decoded token ids); ~4 chars a token


def parse_int_list(text: str, what: str) -> list[int]:
    """``"1,16,64"`` -> [1, 16, 64]; a one-line error for anything else."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SystemExit(f"{what}: {text!r} is not a comma-separated list of integers") from None
    if not values or any(v < 1 for v in values):
        raise SystemExit(f"{what}: {text!r}: give one or more integers >= 1")
    return values


def sse_chunk(text: str | None, usage: dict | None = None) -> bytes:
    """One SSE message shaped like vLLM's ``/v1/completions`` stream chunk (a token, or the closing usage)."""
    body = {"id": "cmpl-stub", "object": "text_completion", "created": 0, "model": "stub",
            "choices": [] if text is None else [{"index": 0, "text": text, "logprobs": None,
                                                  "finish_reason": None, "stop_reason": None}],
            "usage": usage}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def serve(port: int, tpot_s: float, ready) -> None:
    """The stub server (a child process): parse the body, first chunk at once, then one chunk per ``tpot_s``."""
    from aiohttp import web

    async def completions(request):
        payload = await request.json()
        out = int(payload.get("max_tokens") or 1)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(sse_chunk(" tok"))
        for _ in range(out - 1):
            await asyncio.sleep(tpot_s)
            await resp.write(sse_chunk(" tok"))
        await resp.write(sse_chunk(None, {"prompt_tokens": 0, "completion_tokens": out, "total_tokens": out}))
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application(client_max_size=1 << 26)
    app.router.add_post("/v1/completions", completions)

    async def main():
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def load_request_module():
    """vLLM's bench request-function module, loaded from the installed wheel's file (no ``vllm`` package import)."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("vLLM is not installed in this interpreter: pip install --no-deps vllm==<release>")
    root = Path(list(spec.submodule_search_locations)[0])
    path = root / "benchmarks" / "lib" / "endpoint_request_func.py"
    if not path.is_file():
        raise SystemExit(f"this vLLM has no {path.relative_to(root.parent)} (bench client module); use >= 0.10")
    mod_spec = importlib.util.spec_from_file_location("vllm_bench_request_func", path)
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    version = "unknown"
    try:
        from importlib.metadata import version as dist_version
        version = dist_version("vllm")
    except Exception:       # metadata missing: the timing still stands, the release is then unnamed
        pass
    return module, version


async def run_level(module, url: str, isl: int, osl: int, conc: int, n: int) -> dict[str, float]:
    """``n`` requests at most ``conc`` at once (as ``vllm bench serve --max-concurrency``): client TTFTs, CPU."""
    import aiohttp
    prompt = ("word " * (isl * CHARS_PER_TOKEN // 5))[: isl * CHARS_PER_TOKEN]
    gate = asyncio.Semaphore(conc)
    connector = aiohttp.TCPConnector(limit=conc, keepalive_timeout=60)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600)) as session:
        async def one():
            async with gate:
                req = module.RequestFuncInput(prompt=prompt, api_url=url, prompt_len=isl, output_len=osl,
                                              model="stub", ignore_eos=True)
                return await module.async_request_openai_completions(req, session)

        await asyncio.gather(*(one() for _ in range(conc)))          # warm the connections, not counted
        cpu0, wall0 = time.process_time(), time.perf_counter()
        outs = await asyncio.gather(*(one() for _ in range(n)))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    bad = [o.error for o in outs if not o.success]
    if bad:
        raise SystemExit(f"stub run failed ({len(bad)} of {n}): {bad[0].splitlines()[-1] if bad[0] else '?'}")
    ttft_ms = [1e3 * o.ttft for o in outs]
    return {"n": n, "ttft_p50_ms": statistics.median(ttft_ms), "ttft_mean_ms": statistics.fmean(ttft_ms),
            "cpu_per_request_ms": 1e3 * cpu / n, "cpu_per_chunk_us": 1e6 * cpu / (n * (osl + 2)),
            "wall_s": wall}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--conc", default="1,16,64")
    ap.add_argument("--isl", default="1024,8192")
    ap.add_argument("--osl", type=positive_int, default=64)
    ap.add_argument("--tpot-ms", type=nonneg_float, default=10.0)
    ap.add_argument("--requests", type=nonneg_int, default=0, help="per level (default max(32, 4 x CONC))")
    ap.add_argument("--port", type=bounded(True, 1, high=65535), default=18733)
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    concs, isls = parse_int_list(args.conc, "--conc"), parse_int_list(args.isl, "--isl")
    check_out_path(args.json or None)
    module, version = load_request_module()
    ready = multiprocessing.Event()
    server = multiprocessing.Process(target=serve, args=(args.port, args.tpot_ms / 1e3, ready), daemon=True)
    server.start()
    if not ready.wait(30):
        server.terminate()
        raise SystemExit(f"the stub server did not start on port {args.port}")
    url = f"http://127.0.0.1:{args.port}/v1/completions"
    print(f"vLLM {version} bench request function (async_request_openai_completions), stub server, "
          f"OSL {args.osl}, {args.tpot_ms} ms between chunks; Python {sys.version.split()[0]}")
    print("ISL  CONC    n  TTFT p50 ms  TTFT mean ms  client CPU ms/request  client CPU us/chunk")
    rows = []
    try:
        for isl in isls:
            for conc in concs:
                n = args.requests or max(32, 4 * conc)
                r = asyncio.run(run_level(module, url, isl, args.osl, conc, n))
                rows.append({"isl": isl, "conc": conc, **r})
                print(f"{isl:5d} {conc:4d} {n:4d} {r['ttft_p50_ms']:11.2f} {r['ttft_mean_ms']:13.2f} "
                      f"{r['cpu_per_request_ms']:22.2f} {r['cpu_per_chunk_us']:20.1f}")
    finally:
        server.terminate()
    if args.json:
        Path(args.json).write_text(json.dumps({"vllm": version, "args": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    run_script(main)
