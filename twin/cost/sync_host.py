"""The engine core's CPU time per sequence that a server WITHOUT async scheduling adds to every step:
``sync_seq_host_s`` (seconds per scheduled sequence per step; reported in us).

Between two forward passes vLLM's engine core runs, per scheduled request, Python work that grows with the
batch: the scheduler's ``schedule()`` (one entry per running request), the model runner's state update and input
preparation for the batch, the sampled tokens' book-keeping and ``update_from_output()`` (append the token, check
the stop conditions, build the request's output for the front end). With async scheduling (vLLM's default from
0.14, release notes / #27614; ``--async-scheduling`` before) that work for step k+1 runs while the GPU executes
step k, so only what the GPU does not cover is exposed, and the roofline's fitted ``per_seq_overhead_s`` (18.7 us,
fitted on async servers) is what remains of it. Without async scheduling the GPU idles while the host does it:
the step pays ``sync_seq_host_s x sequences`` on top. Prior: 0 (the roofline's async-server serving fit).

Embedded value (``twin.cost.default_terms.SYNC_HOST_TERMS``): read off the only decode rows in the data that ran
without async scheduling and show their TPOT cleanly, Qwen3-32B bf16 on H100 (vLLM 0.12.0), on the TP8 rows and
checked on the TP2 / TP4 rows held out (docs/fidelity.md, "Round 6: decode per sequence"). Where a server's
scheduler is async, the cost model is built without a deployment (the bare roofline's default), or the
per-sequence cost is given (a calibration's or a fit's value is the server's whole per-sequence cost), it is 0.
In the fitting world the same exposure is the scoped ``per_seq_overhead_s@sync`` (``twin.fitting.scoped``), whose
embedded value is ``per_seq_overhead_s`` plus this term (``twin.fitting.provenance.embedded_start``).

Round 10 (docs/fidelity.md "Round 10: Qwen3's sync decode and Kimi INT4 held out"): the Qwen3 rows that set the
45 us are also the data's only rows sampled with top-k / top-p (their client sends no sampling parameters, so
Qwen3's generation config applies, and vLLM 0.12 sorts the logits in PyTorch: ``twin.cost.sort_sampler``, ~17-19
us per sequence on an H100 by its kernels, round 11), and the sync loop's own Python is ~11 us (round 13:
vLLM 0.12's own scheduler and output update timed, ``benchmarks/sync_engine_host.py``; round 9's model of it gave
~3 us, ``benchmarks/sync_host_prior.py``). The value
is the rows' sum; a greedy sync server, or an async one sampled that way, is not what it was read off.
"""

from __future__ import annotations

from twin.cost.default_terms import SYNC_HOST_TERMS
from twin.cost.param_checks import check_nonneg

EMBEDDED_SYNC_SEQ_HOST_S = SYNC_HOST_TERMS["sync_seq_host_s"]


def exposed_seq_host_s(async_scheduling: bool, sync_seq_host_s: float | None = None,
                       per_seq_overhead_s: float | None = None) -> float:
    """Seconds per scheduled sequence per step that the host adds to the step: 0 with async scheduling or where
    ``per_seq_overhead_s`` is given (a calibration's or a fit's value is the server's whole per-sequence cost),
    else the given ``sync_seq_host_s`` (None: the embedded value); a one-line error when it is negative."""
    if async_scheduling or per_seq_overhead_s is not None:
        return 0.0
    return check_nonneg("sync_seq_host_s", EMBEDDED_SYNC_SEQ_HOST_S if sync_seq_host_s is None else sync_seq_host_s)


def explain_sync_host(parts: dict[str, float], exposed_s: float, n_seqs: int) -> None:
    """Move the exposed host time (``exposed_s`` per sequence, ``n_seqs`` sequences) out of
    ``parts["overhead_s"]`` into its own part ``sync_seq_host_s`` (seconds per step), only where it is set."""
    if exposed_s:
        parts["sync_seq_host_s"] = exposed_s * n_seqs
        parts["overhead_s"] -= parts["sync_seq_host_s"]
