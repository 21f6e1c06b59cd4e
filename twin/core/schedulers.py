"""Pick the scheduler a configuration names."""

from __future__ import annotations

from twin.core.scheduler import Scheduler
from twin.core.scheduler_base import SchedulerBase
from twin.core.scheduler_config import SchedulerConfig
from twin.core.scheduler_prefill_first import PrefillFirstScheduler
from twin.core.scheduler_static import StaticBatchScheduler

SCHEDULERS: dict[str, type[SchedulerBase]] = {
    "continuous": Scheduler,
    "prefill_first": PrefillFirstScheduler,
    "static": StaticBatchScheduler,
}


def make_scheduler(config: SchedulerConfig, num_gpu_blocks: int) -> SchedulerBase:
    return SCHEDULERS[config.scheduler](config, num_gpu_blocks)
