"""Speculative decoding in the twin: acceptance models, drafters' costs and memory, the engine's speculator,
and the scenario section. The token accounting (``num_tokens_with_spec``, draft KV slots, rollback) lives in
the serving core (``twin.core.scheduler``, ``twin.core.scheduler_base``)."""

from twin.spec_decode.acceptance import AcceptanceModel, iid_expected_tokens
from twin.spec_decode.config import METHODS, AcceptanceConfig, SpeculativeDecodingConfig, check_task_classes
from twin.spec_decode.drafters import Drafter, ModelDrafter, NgramDrafter, draft_model_drafter, head_drafter
from twin.spec_decode.factory import build_drafter, speculator_factory
from twin.spec_decode.speculator import SpecDecodeStats, Speculator
from twin.spec_decode.step_cost import SpecStepCost

__all__ = [
    "METHODS", "AcceptanceConfig", "AcceptanceModel", "Drafter", "ModelDrafter", "NgramDrafter", "SpecDecodeStats",
    "SpecStepCost", "SpeculativeDecodingConfig", "Speculator", "build_drafter", "check_task_classes", "draft_model_drafter",
    "head_drafter", "iid_expected_tokens", "speculator_factory",
]
