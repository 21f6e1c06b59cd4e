"""Parallel layouts as vLLM runs them, and the bytes their MoE collectives move.

One vLLM server (``vllm serve``) runs ``tensor_parallel_size`` (TP) x ``pipeline_parallel_size`` (PP) x
``data_parallel_size`` (DP) GPUs:

* **TP** shards every layer's weights and KV heads over tp GPUs; an all-reduce joins them twice per layer.
* **PP** splits the layers into pp consecutive stages; a GPU holds 1/pp of the layers (weights and KV).
* **DP** (``--data-parallel-size``) runs dp attention replicas (engine cores) behind one API front end, which
  sends each request to the least loaded rank (vLLM's DP load balancer scores ranks by waiting x 4 + running).
  Each rank has its own scheduler and KV pool (KV sizing is per DP rank). The MoE layers are shared: vLLM
  flattens the MoE group to all tp x dp GPUs, so the routed experts are sharded over tp x dp GPUs and every
  MoE layer sees the tokens of every DP rank.
* **EP** (``--enable-expert-parallel``): the routed experts are placed whole, E / (tp x dp) per GPU, instead of
  each expert being split tp x dp ways. Bytes and FLOPs per GPU are the same either way (balanced routing);
  what changes is the communication when dp > 1.

MoE communication per MoE layer and step (per GPU, T = tokens this DP rank schedules, h = hidden size,
b = activation bytes; balanced ranks):

* dp = 1: the MoE output is all-reduced inside TP like any layer (the roofline's all-reduce term).
* dp > 1, ``allgather_reducescatter`` (vLLM's default ``--all2all-backend``; ``naive`` moves the same bytes):
  dispatch all-gathers every rank's hidden states and combine reduce-scatters the outputs:
  2 x (dp - 1) x T x h x b bytes.
* dp > 1, ``deepep`` (DeepEP / pplx all-to-all): each token goes to the GPUs of its top-k experts, a share
  (W - 1) / W of them remote (W = tp x dp), and comes back: 2 x (T / tp) x k x h x b x (W - 1) / W bytes.

Each costs bytes / link bandwidth + 2 latencies per MoE layer; the link is one direction of the GPU's
interconnect (NVLink, NVSwitch or PCIe) while the tp x dp GPUs fit one interconnect domain
(``GpuSpec.nvlink_domain_gpus``: 8 on an HGX board, 72 in an NVL72 rack), else the scale-out network.

Not modelled: DP ranks step in lockstep when the model has MoE layers (idle ranks run dummy batches and a
rank's step waits for the slowest); the twin steps each rank on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from twin.errors import TwinInputError

ALL2ALL_BACKENDS = ("allgather_reducescatter", "naive", "deepep")


@dataclass(frozen=True)
class ParallelLayout:
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    all2all_backend: str = "allgather_reducescatter"

    def __post_init__(self) -> None:
        for name in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise TwinInputError(f"{name} = {v!r}: must be a positive integer")
        if self.all2all_backend not in ALL2ALL_BACKENDS:
            raise TwinInputError(f"all2all_backend = {self.all2all_backend!r}: allowed: {', '.join(ALL2ALL_BACKENDS)}")

    @property
    def tp(self) -> int:
        return self.tensor_parallel_size

    @property
    def dp(self) -> int:
        return self.data_parallel_size

    @property
    def pp(self) -> int:
        return self.pipeline_parallel_size

    @property
    def moe_shards(self) -> int:
        """GPUs the routed experts of one stage are spread over: tp x dp."""
        return self.tp * self.dp

    @property
    def expert_parallel_size(self) -> int:
        return self.moe_shards if self.enable_expert_parallel else 1

    @property
    def gpus(self) -> int:
        """GPUs one server uses: tp x pp x dp."""
        return self.tp * self.pp * self.dp

    @property
    def is_trivial(self) -> bool:
        return self.pp == 1 and self.dp == 1 and not self.enable_expert_parallel

    @classmethod
    def for_model(cls, layout: "ParallelLayout | None", tensor_parallel_size: int, model: Any) -> "ParallelLayout":
        """``layout`` (default: tensor parallelism only) checked against ``tensor_parallel_size`` and ``model``."""
        layout = layout or cls(tensor_parallel_size=tensor_parallel_size)
        if layout.tp != tensor_parallel_size:
            raise TwinInputError(f"layout.tensor_parallel_size = {layout.tp}: differs from tensor_parallel_size "
                                 f"{tensor_parallel_size}")
        layout.check(model)
        return layout

    def check(self, model: Any) -> None:
        model.check_tensor_parallel(self.tp)
        if self.enable_expert_parallel and not model.is_moe:
            raise TwinInputError(f"enable_expert_parallel: model {model.name} has no routed experts")
        if self.pp > model.num_hidden_layers:
            raise TwinInputError(f"pipeline_parallel_size = {self.pp}: more stages than model {model.name}'s "
                                 f"{model.num_hidden_layers} layers")
        if model.is_moe and self.enable_expert_parallel and self.moe_shards > model.num_experts:
            raise TwinInputError(f"tensor_parallel_size x data_parallel_size = {self.moe_shards}: more expert-"
                                 f"parallel ranks than model {model.name}'s {model.num_experts} routed experts")

    def moe_comm_bytes_per_token(self, model: Any, activation_bytes: int) -> float:
        """Bytes one GPU sends and receives per MoE layer per token its DP rank schedules (module docstring)."""
        if not model.is_moe or self.dp == 1:
            return 0.0
        h = model.hidden_size
        if self.all2all_backend == "deepep":
            w = self.moe_shards
            return 2.0 * model.num_experts_per_tok * h * activation_bytes * (w - 1) / w / self.tp
        return 2.0 * (self.dp - 1) * h * activation_bytes

    def as_dict(self) -> dict[str, Any]:
        return {"tensor_parallel_size": self.tp, "pipeline_parallel_size": self.pp,
                "data_parallel_size": self.dp, "enable_expert_parallel": self.enable_expert_parallel,
                "expert_parallel_size": self.expert_parallel_size, "all2all_backend": self.all2all_backend,
                "gpus": self.gpus}
