"""AdamW with its work split across ranks (ZeRO stage 1): each rank updates only its shard of the parameters.

Why: otherwise every rank runs the whole AdamW update after the backward pass, on gradients all-reduced to every
rank (docs/benchmarks.md, optimisation log). Here FusedDataParallel reduce-scatters each bucket's gradients
instead (half the bytes of an all-reduce on two ranks), and as soon as a bucket's shard is reduced, each rank updates
its 1/world_size shard of it and all-gathers the result, on a stream beside the rest of the backward pass. Only the
last bucket's update is left after the backward pass. The arithmetic is AdamW's, element by element, so the weights
follow the unsharded run's.

Checkpoints keep the unsharded format: `state_dict()` gathers the moments from every rank (a collective: call it on
every rank) into `torch.optim.AdamW`'s layout for `module.parameters()`, and `load_state_dict()` takes that layout and
keeps this rank's part, so a run resumes on any number of GPUs, sharded or not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.optim.adamw import adamw

from ranker.gpu.fused_data_parallel import ALL_GATHER, Bucket, FusedDataParallel

MOMENTS = ("exp_avg", "exp_avg_sq")
# Per-group settings that describe this process's device rather than the training run: never taken from a checkpoint.
DEVICE_SETTINGS = frozenset({"params", "capturable", "fused", "foreach", "differentiable"})


class ShardedAdamW(torch.optim.Optimizer):
    """Takes the hyperparameters (and any state) of `optimizer`, an AdamW over `owner.module.parameters()`, and from
    then on stands in for it: give this one to the scheduler and the step. Its own parameters are this rank's bucket
    shards (flat views) followed by the parameters outside the dense layers, which every rank updates whole."""

    def __init__(self, owner: FusedDataParallel, optimizer: torch.optim.Optimizer):
        if not owner.shard_optimizer or len(optimizer.param_groups) != 1:
            raise ValueError("ShardedAdamW: needs FusedDataParallel(shard_optimizer=True) and a one-group AdamW")
        self.owner = owner
        self.module_parameters = list(owner.module.parameters())
        settings = hyperparameters(optimizer.param_groups[0])
        super().__init__([bucket.parameter_shard for bucket in owner.buckets] + owner.other_parameters, settings)
        on_device = settings.get("capturable") or settings.get("fused")  # where AdamW keeps its step counts
        for parameter in self.param_groups[0]["params"]:  # allocated now, so that a captured step allocates nothing
            self.state[parameter] = {
                "step": torch.zeros((), dtype=torch.float32, device=parameter.device if on_device else "cpu"),
                "exp_avg": torch.zeros_like(parameter), "exp_avg_sq": torch.zeros_like(parameter)}
        if optimizer.state:
            self.load_state_dict(optimizer.state_dict())
        owner.bucket_update = self._update_bucket

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        """Finishes the update that the backward pass started bucket by bucket (FusedDataParallel runs
        `_update_bucket` as each bucket's gradients are reduced): updates the parameters outside the dense layers,
        then makes the compute stream wait for every bucket's update and all-gather. A `closure` (Lightning's
        automatic optimization passes one) runs the forward and backward pass first, as for any torch optimizer;
        its loss is returned."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self.owner.other_parameters:
            self._update(self.owner.other_parameters, [p.grad for p in self.owner.other_parameters])
        self.owner.wait_for_update()
        return loss

    def _update_bucket(self, bucket: Bucket) -> None:
        self._update([bucket.parameter_shard], [bucket.gradient_shard])

    def _update(self, parameters: list[torch.Tensor], gradients: list[torch.Tensor]) -> None:
        group = self.param_groups[0]
        states = [self.state[parameter] for parameter in parameters]
        beta1, beta2 = group["betas"]
        adamw(parameters, gradients, [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states], [],
              [s["step"] for s in states], foreach=group["foreach"], capturable=group["capturable"],
              fused=group["fused"], amsgrad=False, beta1=beta1, beta2=beta2, lr=group["lr"],
              weight_decay=group["weight_decay"], eps=group["eps"], maximize=group["maximize"])

    def state_dict(self) -> dict[str, Any]:
        """AdamW's layout over `module.parameters()`, whole on every rank. Collective."""
        moments = {name: torch.empty_like(self.owner.gradient_buffer) for name in MOMENTS}
        for bucket in self.owner.buckets:
            for name, flat in moments.items():
                ALL_GATHER(flat[bucket.start:bucket.start + bucket.gradients.numel()],
                           self.state[bucket.parameter_shard][name])
        step = self.state[self.owner.buckets[0].parameter_shard]["step"]
        state = {}
        for index, parameter in enumerate(self.module_parameters):
            if parameter in self.owner.layer_offsets:
                offset = self.owner.layer_offsets[parameter]
                state[index] = {"step": step.clone(), **{
                    name: flat[offset:offset + parameter.numel()].view_as(parameter).clone()
                    for name, flat in moments.items()}}
            else:
                state[index] = {name: value.clone() for name, value in self.state[parameter].items()}
        return {"state": state, "param_groups": [{**hyperparameters(self.param_groups[0]),
                                                  "params": list(range(len(self.module_parameters)))}]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Takes AdamW's layout over `module.parameters()` (what `state_dict` writes, and what an unsharded run's
        AdamW writes) and keeps this rank's shard of it."""
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != 1 or len(saved_groups[0]["params"]) != len(self.module_parameters):
            raise ValueError(f"optimizer state: expected one group of {len(self.module_parameters)} parameters (this "
                             "model's); the checkpoint is from another model, start a fresh checkpoint folder")
        steps = {float(entry["step"]) for entry in state_dict["state"].values()}
        if len(steps) > 1:
            raise ValueError(f"optimizer state: parameters at different steps {sorted(steps)}; the checkpoint is "
                             "damaged, resume from an earlier one")
        group = self.param_groups[0]
        for key, value in saved_groups[0].items():
            if key in DEVICE_SETTINGS:
                continue
            if isinstance(group.get(key), torch.Tensor):  # a captured step reads this tensor: keep it, set its value
                group[key].fill_(float(value))
            else:
                group[key] = value.item() if isinstance(value, torch.Tensor) else value
        by_index = dict(zip(saved_groups[0]["params"], self.module_parameters))
        moments = {name: torch.zeros_like(self.owner.gradient_buffer) for name in MOMENTS}
        for index, entry in state_dict["state"].items():
            parameter = by_index[index]
            if parameter in self.owner.layer_offsets:
                offset = self.owner.layer_offsets[parameter]
                for name, flat in moments.items():
                    flat[offset:offset + parameter.numel()].copy_(entry[name].reshape(-1))
            else:
                for name, value in self.state[parameter].items():
                    value.copy_(entry[name])
        for bucket in self.owner.buckets:
            shard = self.state[bucket.parameter_shard]
            for name, flat in moments.items():
                shard[name].copy_(flat[bucket.shard_start:bucket.shard_start + bucket.parameter_shard.numel()])
            shard["step"].fill_(max(steps, default=0.0))


def hyperparameters(group: dict[str, Any]) -> dict[str, Any]:
    """A parameter group's settings, without its parameters."""
    return {key: value for key, value in group.items() if key != "params"}
