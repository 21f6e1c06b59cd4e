"""Workloads: synthetic traffic (arrival processes, length distributions, prefix structure, task classes,
multi-turn sessions, closed-loop users) and trace readers (Azure 2023, Mooncake, BurstGPT, length-only CSV).

``build_workload(config, seed)`` returns either a list of ``RequestSpec`` sorted by arrival (open loop) or a
``ClosedLoopWorkload`` whose ``next_request(user_index, now_s)`` the engine calls.
"""

from twin.workload.config import ClassConfig, TraceConfig, WorkloadConfig, load_workload_config
from twin.workload.distribution_config import LengthDist, TimeDist
from twin.workload.generate import (
    ClosedLoopWorkload,
    build_workload,
    open_loop_requests,
    trace_requests,
)
from twin.workload.paths import expand_path, traces_dir
from twin.workload.rng import stream
from twin.workload.spec import RequestSpec
from twin.workload.trace_data import Trace, TraceWarning
from twin.workload.traces import read_column, read_trace
from twin.workload.validation_errors import format_validation_error

__all__ = [
    "ClassConfig", "ClosedLoopWorkload", "LengthDist", "RequestSpec", "TimeDist", "Trace", "TraceConfig",
    "TraceWarning", "WorkloadConfig", "build_workload", "expand_path", "format_validation_error",
    "load_workload_config", "open_loop_requests", "read_column", "read_trace", "stream", "trace_requests",
    "traces_dir",
]
