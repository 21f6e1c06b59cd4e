"""Which carried term moves a held-out generation (issue 33, round 13; docs/fidelity.md "Round 13: terms that transfer
between generations"). No fit: a GPU fold's held-out cases (the default report's: every 16th silicon row plus the
inference-perf runs) are simulated at the values one fold report carried (``BASE``, a ``fidelity_real.py --json``
file), at another report's values for the same fold (``OTHER``), and at ``BASE`` with one group of terms taken from
``OTHER`` at a time: which group carries the difference between the two fits.

    python benchmarks/transfer_terms.py BASE.json OTHER.json [--group H100-SXM] [--embed] [--set name=value,...]

``--embed``: the two round-12 readings switched on in the cost model for every variant (Kimi-K2.5 NVFP4's per-request
time, ``twin.cost.mla_request.READINGS``; gpt-oss's active expert share 0.75 on the MXFP4 experts), as when ``OTHER``
was fitted with them embedded. ``--set``: more values on every variant."""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager, nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_float, positive_int  # noqa: E402
from benchmarks.fidelity_real import REFIT_SILICON_EVERY  # noqa: E402
from benchmarks.fold_compare import error_cell  # noqa: E402
from benchmarks.fold_report import fold_params  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import all_cases, errors, family_of, gpu_of  # noqa: E402
from twin.fitting.scoped import parse_scoped_set_options  # noqa: E402

# the terms a one-generation fold carries to the other, by what they are
GROUPS: dict[str, tuple[str, ...]] = {
    "bandwidth": ("memory_efficiency", "memory_efficiency@blackwell", "kv_memory_efficiency@hopper+kv_fp8"),
    "per_seq": ("per_seq_overhead_s", "per_seq_overhead_s@sync"),
    "step": ("step_overhead_s",),
    "allreduce": ("allreduce_latency_s", "fused_allreduce_latency_s@hopper+experts_mxfp4"),
    "bench_path": ("request_path_s@client_vllm_bench",),
}
KEYS = (("mean_ttft_ms", "TTFT"), ("mean_tpot_ms", "TPOT"), ("mean_e2el_ms", "E2E"))
# the round-12 readings, as ``--embed`` switches them on (the tried entries of default_terms / mla_request)
ACTIVE_SHARE_MXFP4 = 0.75


@contextmanager
def embedded_readings():
    """The two round-12 readings switched on inside the block (here and carried to every simulation worker,
    whatever its start method), restored when it ends (also on error)."""
    from twin.cost import default_terms, mla_request
    from twin.fitting.carried_patches import Patch, carried
    mxfp4 = {"mxfp4": {"moe_active_expert_share": ACTIVE_SHARE_MXFP4}}
    with carried(Patch(mla_request.__name__, "MLA_EXPERT_REQUEST_S", dict(mla_request.READINGS), "dict"),
                 Patch(default_terms.__name__, "EXPERT_FORMAT_TERMS", mxfp4, "dict")):
        yield


def variants(base: dict[str, float], other: dict[str, float], extra: dict[str, float]) -> dict[str, dict]:
    """``base``, ``other`` and ``base`` with each group at ``other``'s values, each with ``extra`` on top."""
    out = {"base": base | extra, "other": other | extra}
    for g, names in GROUPS.items():
        out[f"base + other's {g}"] = base | {n: other[n] for n in names if n in other} | extra
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", type=Path)
    ap.add_argument("other", type=Path)
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--group", default="H100-SXM", help="the GPU fold's held-out group")
    ap.add_argument("--embed", action="store_true", help="the two round-12 readings switched on")
    ap.add_argument("--set", default="", help="name=value,...: on every variant")
    ap.add_argument("--only", default="", help="comma-separated variant labels to run (default: all)")
    ap.add_argument("--sim-s", type=positive_float, default=60.0)
    ap.add_argument("--workers", type=positive_int, default=1)
    args = ap.parse_args()
    with embedded_readings() if args.embed else nullcontext():
        run(args)


def run(args) -> None:
    """``main``'s variants at its options (``args``), each printed as it finishes."""
    extra = parse_scoped_set_options([kv for kv in args.set.split(",") if kv])
    cases = [c for c in all_cases(args.ground_truth, silicon_every=REFIT_SILICON_EVERY) if gpu_of(c) == args.group]
    base, other = (fold_params(p, "GPU", args.group) for p in (args.base, args.other))
    for n in sorted(set(base) | set(other)):
        if base.get(n) != other.get(n):
            print(f"  {n}: {base.get(n)} -> {other.get(n)}")
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    for label, params in variants(base, other, extra).items():
        if only and label not in only:
            continue
        runs = simulate_cases(cases, params, max_sim_s=args.sim_s, workers=args.workers)
        errs = [errors(c, r.metrics) for c, r in zip(cases, runs)]
        fams: dict[str, list[dict]] = {}
        for c, e in zip(cases, errs):
            fams.setdefault(family_of(c), []).append(e)
        print(f"== {label} (n {len(cases)}): " + ", ".join(f"{k} {error_cell(errs, key)}" for key, k in KEYS)
              + " | " + "; ".join(f"{f} {len(v)} TTFT {error_cell(v, 'mean_ttft_ms')} "
                                  f"TPOT {error_cell(v, 'mean_tpot_ms')}" for f, v in sorted(fams.items())), flush=True)


if __name__ == "__main__":
    run_script(main)
