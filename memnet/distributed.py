"""Training in several processes under torchrun, with DistributedDataParallel.

    torchrun --standalone --nproc-per-node=2 -m memnet train --data en-valid --task 1 --out runs/qa1

torchrun starts one process per device (or per CPU share) and tells each its place through the
environment (RANK, WORLD_SIZE, LOCAL_RANK). Every process builds the same restarts from the same
seeds and draws the same data order; each computes the gradient of its share of every batch
(questions rank, rank + W, rank + 2W, ...), and DistributedDataParallel sums the shares across
processes (gloo on the CPU, NCCL on GPUs) before the step, so every process takes the step one
process would take on the whole batch, and the weights stay identical everywhere. Process 0
alone prints and writes the run folder. Without torchrun (WORLD_SIZE unset or 1) none of this
runs. The Numba kernel is single-process: a distributed run trains the reference model.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from memnet.config import ConfigError


@dataclass(frozen=True)
class World:
    """This process's place among the run's processes."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0  # the process's number on its own machine: its GPU

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1


def world() -> World:
    """The World torchrun describes in the environment (one process without it)."""
    env = os.environ

    def number(name: str, default: int) -> int:
        text = env.get(name, str(default))
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{name}: expected a whole number (torchrun sets it), found {text!r}") from None

    return World(number("RANK", 0), number("WORLD_SIZE", 1), number("LOCAL_RANK", 0))


def device_for(device: torch.device, here: World) -> torch.device:
    """train.device for this process: `cuda` without an index is this process's own GPU."""
    if here.distributed and device.type == "cuda" and device.index is None:
        return torch.device("cuda", here.local_rank)
    return device


def start(here: World, device: torch.device) -> None:
    """Join the run's process group (NCCL for GPUs, else gloo); nothing for one process."""
    if here.distributed and not dist.is_initialized():
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")


def stop() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def backend() -> str:
    return dist.get_backend() if dist.is_initialized() else "none"


def summed(values: torch.Tensor) -> torch.Tensor:
    """values added up over every process (a copy; values itself where there is one process)."""
    if not dist.is_initialized():
        return values
    total = values.clone()
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return total
