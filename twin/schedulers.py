"""Pick the scheduler a configuration names."""

from __future__ import annotations

from twin.scheduler import Scheduler
from twin.scheduler_base import SchedulerBase
from twin.scheduler_config import SchedulerConfig
from twin.scheduler_prefill_first import PrefillFirstScheduler
from twin.scheduler_static import StaticBatchScheduler

SCHEDULERS: dict[str, type[SchedulerBase]] = {
    "continuous": Scheduler,
    "prefill_first": PrefillFirstScheduler,
    "static": StaticBatchScheduler,
}


def make_scheduler(config: SchedulerConfig, num_gpu_blocks: int) -> SchedulerBase:
    return SCHEDULERS[config.scheduler](config, num_gpu_blocks)
