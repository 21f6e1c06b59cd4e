"""Where speculative decoding stops paying: speedup of output throughput (and TPOT) over no speculation, by
concurrency, for acceptance from none (random-token prompts) to high and for each drafter, on the roofline twin.

Closed-loop clients (``concurrency`` users, no think time), fixed 512-token prompts and 256-token outputs,
llama-3.1-8b on one H100-SXM, vLLM defaults otherwise. Prints one table per drafter, a ``LOSS`` mark on every
cell where speculation is slower than none, and the losing region per acceptance:

    python benchmarks/spec_crossover.py [--methods draft_model,eagle,eagle3,mtp,ngram] [--k 4]
        [--model llama-3.1-8b] [--vllm-version 0.11] [--sampling random]

A speedup < 1 is a loss. At concurrency 1 the target's step is weight-read bound, so verifying k + 1 tokens
costs about as much as decoding one and the gain is the acceptance length against the drafter's passes, the
host's launches and the rejection sampler (twin.spec_decode.step_cost); as concurrency grows the verified
tokens turn the target's GEMMs compute-bound k + 1 times sooner than decoding, and the rejection sampler's
full-vocabulary passes grow with batch x k, so the gain shrinks and, at low acceptance, turns into a loss.
With acceptance 0 (random tokens against a learned drafter) every cell is a loss.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import bounded, number_list, positive_int  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.sim.run import metrics_of, run_body  # noqa: E402
from twin.scenario import Scenario  # noqa: E402

CONCURRENCY = (1, 4, 16, 64, 256)
ACCEPTANCE = {"high (code, a=0.8)": 0.8, "low (creative, a=0.4)": 0.4, "none (random tokens)": 0.0}
DRAFT_MODELS = {"llama-3.1-8b": "llama-3.2-1b", "llama-3.1-70b": "llama-3.2-1b", "qwen2.5-7b": "qwen2.5-0.5b",
                "qwen2.5-72b": "qwen2.5-0.5b"}


def body(model: str, gpu: str, concurrency: int, spec: dict | None, tp: int = 1, version: str | None = None):
    data = {
        "name": "spec-crossover",
        "deployment": {"gpu": gpu, "model": model, "tensor_parallel_size": tp},
        **({"server": {"vllm_version": version}} if version else {}),
        "workload": {
            "arrivals": {"process": "closed_loop", "concurrency": concurrency},
            "num_requests": max(2 * concurrency, 8),
            "classes": [{"name": "task", "share": 1.0, "prompt": {"suffix_tokens": 512}, "output_tokens": 256}],
        },
        "seed": 0,
    }
    if spec is not None:
        data["speculative_decoding"] = spec
    return Scenario(data).body()


def run(model: str, gpu: str, concurrency: int, spec: dict | None, tp: int = 1, version: str | None = None) -> dict:
    b = body(model, gpu, concurrency, spec, tp, version)
    return metrics_of(run_body(b), b)


def spec_config(method: str, k: int, rate: float, model: str, ngram_proposal_rate: float = 0.5,
                sampling: str = "random") -> dict:
    acceptance = {"rate": rate}
    if method == "ngram":
        acceptance["proposal_rate"] = ngram_proposal_rate     # prompt lookup finds a match at only some steps
    cfg = {"method": method, "num_speculative_tokens": k, "acceptance": {"task": acceptance}, "sampling": sampling}
    if method == "draft_model":
        cfg["draft_model"] = DRAFT_MODELS.get(model, "llama-3.2-1b")
    return cfg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="draft_model,eagle,eagle3,ngram")
    ap.add_argument("--k", type=positive_int, default=4)
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--gpu", default="H100-SXM")
    ap.add_argument("--tp", type=positive_int, default=1)
    ap.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)))
    ap.add_argument("--ngram-proposal-rate", type=bounded(False, 0.0, high=1.0), default=0.5,
                    help="share of steps at which prompt lookup finds a match (ngram only)")
    ap.add_argument("--vllm-version", default=None, help="the modelled vLLM release (default: the newest)")
    ap.add_argument("--sampling", default="random", choices=("greedy", "random", "top_k_top_p"),
                    help="what requests ask for (sets the rejection sampler's work)")
    args = ap.parse_args()
    levels = number_list(args.concurrency, "--concurrency", whole=True, low=1)
    t0 = time.perf_counter()
    base = {c: run(args.model, args.gpu, c, None, args.tp, args.vllm_version) for c in levels}
    print(f"{args.model} on {args.tp}x {args.gpu}, k={args.k}, 512-token prompts, 256-token outputs, closed loop, "
          f"vLLM {args.vllm_version or 'newest'}, sampling {args.sampling}")
    print("no speculation: " + ", ".join(
        f"c={c}: {base[c]['output_throughput']:.0f} tok/s, TPOT {base[c]['mean_tpot_ms']:.2f} ms" for c in levels))
    for method in args.methods.split(","):
        extra = f", match at {args.ngram_proposal_rate:.0%} of steps" if method == "ngram" else ""
        print(f"\n== {method} (k={args.k}{extra}): output-throughput speedup over no speculation "
              f"[TPOT speedup] (draft share of step time) ==")
        header = f"{'acceptance':<24}" + "".join(f"{'c=' + str(c):>29}" for c in levels)
        print(header)
        losing = {}
        for label, rate in ACCEPTANCE.items():
            cells = []
            for c in levels:
                spec = spec_config(method, args.k, rate, args.model, args.ngram_proposal_rate, args.sampling)
                m = run(args.model, args.gpu, c, spec, args.tp, args.vllm_version)
                sp = m["output_throughput"] / base[c]["output_throughput"]
                tp_sp = base[c]["mean_tpot_ms"] / m["mean_tpot_ms"]
                frac = m.get("spec_decode_draft_time_fraction") or 0.0
                mark = " LOSS" if sp < 1.0 else ""
                if sp < 1.0:
                    losing.setdefault(label, []).append(c)
                cells.append(f"{sp:5.2f}x [{tp_sp:4.2f}x] ({frac:4.0%}){mark}")
            print(f"{label:<24}" + "".join(f"{cell:>29}" for cell in cells))
        for label in ACCEPTANCE:
            where = losing.get(label)
            print(f"  losing region, {label}: " + (("concurrency " + ", ".join(map(str, where))) if where else "none"))
    print(f"\n({time.perf_counter() - t0:.1f} s wall)")


if __name__ == "__main__":
    run_script(main)
