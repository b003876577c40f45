"""Run under torchrun with 2 CPU ranks: shard the tiny policy with FSDP2 over gloo, gather its full state dict
as accelerate does for an FSDP2 trainer (``Accelerator.get_state_dict``), and publish it through the trainer's
``publish_state``. ``python -m torch.distributed.run --nproc-per-node 2 fsdp2_publish.py MODEL_DIR RUN_DIR``."""

import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from transformers import AutoModelForCausalLM

from training.ranks import this_rank
from training.step_feed import publish_state
from training.sync import SyncDir


def main() -> None:
    model_dir, run_dir = Path(sys.argv[1]), Path(sys.argv[2])
    dist.init_process_group("gloo")
    rank = this_rank()
    mesh = init_device_mesh("cpu", (rank.world,))
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    shard = next(p for p in model.parameters())
    local = shard.to_local().numel()
    assert local < shard.numel(), "the parameters are not sharded"
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True, cpu_offload=True)
    state = get_model_state_dict(model, options=options)
    publish_state(SyncDir(run_dir), "solver", 0, model, state, rank)
    dist.barrier()
    if rank.main:
        print(f"sharded: rank 0 holds {local} of {shard.numel()} values of {len(state)} tensors")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
