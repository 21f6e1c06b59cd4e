"""Datasets as benchmark clients build them: ``workload.dataset:`` is a shorthand that expands into one task
class (``dataset_class``), so every class feature (timeouts, prefix headers, arrivals) applies unchanged and
``--set workload.classes.0...`` can adjust the expansion.

A dataset's output lengths are what the client asks for: each request's ``max_tokens``. With ``ignore_eos:
true`` (the default, as synthetic benchmarks run) every request generates exactly that many; with ``false`` the
length the model would stop at must be given as ``output_tokens`` and ``max_tokens`` caps it.

Kinds (``kind:``):

* ``random`` (``vllm bench serve --dataset-name random``): ``prefix_len`` tokens shared by every request, then
  ``input_len`` unique tokens drawn uniformly from [floor(input_len (1 - range_ratio)), ceil(input_len (1 +
  range_ratio))], ``max_tokens`` likewise from ``output_len`` (lower end at least 1). vLLM also subtracts the
  tokenizer's special tokens from ``input_len``; the twin has no tokenizer and does not. ``range_ratio_mode:
  lower_bound`` draws as the older ``benchmarks/benchmark_serving.py`` and the copies benchmark suites ship (e.g.
  InferenceX's, which measured the vLLM silicon rows) do: uniformly from [int(input_len x range_ratio),
  input_len] (``range_ratio`` up to 1: fixed lengths), likewise ``max_tokens``.
* ``sonnet`` (vLLM's sonnet dataset): every prompt starts with the same ``prefix_len`` tokens of poem lines and
  is ``input_len`` tokens long; ``max_tokens`` is ``output_len``.
* ``sharegpt``: lognormal prompt and output lengths whose means are ShareGPT's published ones (below).
* ``shared_prefix`` (inference-perf's generator): ``num_groups`` system prompts of ``system_prompt_len`` tokens,
  each with ``num_prompts_per_group`` questions of ``question_len`` tokens (``question_len_std`` > 0: normal,
  at least 1), a finite pool built once (shuffled once unless ``shuffle: false``) and cycled: request i sends
  pool entry i mod pool size. ``multi_turn: true``: each entry is a user whose conversation grows each time it
  comes round (its previous prompt, the answer, then the question again). ``max_tokens``: ``output_len``
  (``output_len_std`` > 0: normal, at least 1).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Union

from pydantic import Field, model_validator

from twin.workload.distribution_config import LengthDist
from twin.workload.strict_model import StrictModel

# ShareGPT (the ShareGPT_V3_unfiltered_cleaned_split conversations vLLM's benchmarks sample): mean prompt
# 161.31 and mean output 337.99 tokens, from Kwon et al., "Efficient Memory Management for Large Language Model
# Serving with PagedAttention" (SOSP 2023), Fig. 11(a). The paper gives no spread: the lognormal sigmas are this
# project's assumption (a wide, right-skewed spread), settable per scenario. vLLM's sampler keeps prompts and
# outputs of >= 4 tokens, prompts of <= 1024 tokens and prompt + output <= 2048 tokens; the clips below follow
# it (outputs clipped to 1024 tokens).
SHAREGPT_MEAN_INPUT_TOKENS = 161.31
SHAREGPT_MEAN_OUTPUT_TOKENS = 337.99
SHAREGPT_SIGMA = 1.0
SHAREGPT_MIN_TOKENS = 4
SHAREGPT_MAX_INPUT_TOKENS = 1024
SHAREGPT_MAX_OUTPUT_TOKENS = 1024


class _Dataset(StrictModel):
    ignore_eos: bool = True
    output_tokens: LengthDist | None = None

    @model_validator(mode="after")
    def _eos(self):
        if self.ignore_eos and self.output_tokens is not None:
            raise ValueError(".output_tokens: means nothing with ignore_eos: true (every request runs to "
                             "max_tokens); set ignore_eos: false to give the model's own lengths")
        if not self.ignore_eos and self.output_tokens is None:
            raise ValueError(".output_tokens: is required with ignore_eos: false (the length the model would "
                             "generate; the dataset's output length is the max_tokens cap)")
        return self

    def _lengths(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ignore_eos": self.ignore_eos}
        if self.output_tokens is not None:
            out["output_tokens"] = self.output_tokens.model_dump(exclude_none=True)
        return out


class RandomDataset(_Dataset):
    kind: Literal["random"]
    input_len: int = Field(1024, ge=1)
    output_len: int = Field(128, ge=1)
    range_ratio: float = Field(0.0, ge=0, le=1, allow_inf_nan=False)
    # centered: vllm bench serve's [L (1 - r), L (1 + r)]; lower_bound: the older benchmark_serving.py's [int(L r), L]
    range_ratio_mode: Literal["centered", "lower_bound"] = "centered"
    prefix_len: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _centered_below_one(self):
        if self.range_ratio_mode == "centered" and self.range_ratio >= 1:
            raise ValueError(f".range_ratio: must be < 1 (got {self.range_ratio!r}; range_ratio_mode: lower_bound "
                             "takes up to 1)")
        return self

    def expand(self) -> dict[str, Any]:
        r = self.range_ratio
        if self.range_ratio_mode == "lower_bound":
            in_lo, in_hi = int(self.input_len * r), self.input_len
            out_lo, out_hi = max(int(self.output_len * r), 1), self.output_len
        else:
            in_lo, in_hi = math.floor(self.input_len * (1 - r)), math.ceil(self.input_len * (1 + r))
            out_lo, out_hi = max(math.floor(self.output_len * (1 - r)), 1), math.ceil(self.output_len * (1 + r))
        if self.prefix_len == 0:
            in_lo = max(in_lo, 1)
        return {"prompt": {"shared_prefix_tokens": self.prefix_len, "suffix_tokens": _range(in_lo, in_hi)},
                "max_tokens": _range(out_lo, out_hi), **self._lengths()}


class SonnetDataset(_Dataset):
    kind: Literal["sonnet"]
    input_len: int = Field(550, ge=1)
    output_len: int = Field(150, ge=1)
    prefix_len: int = Field(200, ge=0)

    @model_validator(mode="after")
    def _prefix(self):
        if self.prefix_len > self.input_len:
            raise ValueError(f".prefix_len: must be <= input_len {self.input_len} (got {self.prefix_len})")
        return self

    def expand(self) -> dict[str, Any]:
        suffix = self.input_len - self.prefix_len
        prompt: dict[str, Any] = {"shared_prefix_tokens": self.prefix_len, "suffix_tokens": suffix}
        return {"prompt": prompt, "max_tokens": self.output_len, **self._lengths()}


class ShareGPTDataset(_Dataset):
    kind: Literal["sharegpt"]
    mean_input_tokens: float = Field(SHAREGPT_MEAN_INPUT_TOKENS, gt=0, allow_inf_nan=False)
    mean_output_tokens: float = Field(SHAREGPT_MEAN_OUTPUT_TOKENS, gt=0, allow_inf_nan=False)
    sigma: float = Field(SHAREGPT_SIGMA, ge=0, allow_inf_nan=False)
    max_input_tokens: int = Field(SHAREGPT_MAX_INPUT_TOKENS, ge=SHAREGPT_MIN_TOKENS)
    max_output_tokens: int = Field(SHAREGPT_MAX_OUTPUT_TOKENS, ge=SHAREGPT_MIN_TOKENS)

    def expand(self) -> dict[str, Any]:
        def lognormal(mean: float, hi: int) -> dict[str, Any]:
            return {"lognormal": {"median": mean * math.exp(-self.sigma ** 2 / 2), "sigma": self.sigma,
                                  "min": SHAREGPT_MIN_TOKENS, "max": hi}}

        return {"prompt": {"suffix_tokens": lognormal(self.mean_input_tokens, self.max_input_tokens)},
                "max_tokens": lognormal(self.mean_output_tokens, self.max_output_tokens), **self._lengths()}


class SharedPrefixDataset(_Dataset):
    kind: Literal["shared_prefix"]
    num_groups: int = Field(10, ge=1)
    num_prompts_per_group: int = Field(10, ge=1)
    system_prompt_len: int = Field(100, ge=0)
    question_len: int = Field(50, ge=1)
    question_len_std: float = Field(0.0, ge=0, allow_inf_nan=False)
    output_len: int = Field(50, ge=1)
    output_len_std: float = Field(0.0, ge=0, allow_inf_nan=False)
    multi_turn: bool = False
    shuffle: bool = True

    def expand(self) -> dict[str, Any]:
        prompt = {"shared_prefix_tokens": self.system_prompt_len, "num_prefix_groups": self.num_groups,
                  "suffix_tokens": _spread(self.question_len, self.question_len_std),
                  "pool": {"prompts_per_group": self.num_prompts_per_group, "shuffle": self.shuffle,
                           "multi_turn": self.multi_turn}}
        return {"prompt": prompt, "max_tokens": _spread(self.output_len, self.output_len_std), **self._lengths()}


DatasetConfig = Annotated[Union[RandomDataset, SonnetDataset, ShareGPTDataset, SharedPrefixDataset],
                          Field(discriminator="kind")]
DATASET_KINDS = ("random", "sonnet", "sharegpt", "shared_prefix")


def dataset_class(dataset: Any) -> dict[str, Any]:
    """The one task class (a ``classes:`` entry, as a mapping) a validated dataset stands for."""
    return {"name": dataset.kind, "share": 1.0, **dataset.expand()}


def _range(lo: int, hi: int) -> Any:
    return lo if lo == hi else {"uniform": [lo, hi]}


def _spread(mean: int, std: float) -> Any:
    return mean if std == 0 else {"normal": {"mean": mean, "std": std, "min": 1}}
