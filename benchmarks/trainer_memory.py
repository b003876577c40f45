"""How much of a CPU trainer's resident memory between updates is freed heap that glibc keeps, and what
``malloc_trim`` gives back: the trainer's own allocator settings (``keep_freed_memory``), the embedded
policy in fp32 master weights with AdamW, bf16 autocast, one update a step on a batch whose sequence length
changes from step to step as self-play's does (longer prompts once the bank puts skills in them).

    .venv/bin/python benchmarks/trainer_memory.py [--model embedded] [--steps 8] [--batch 4]

Prints the resident size (RSS) after each update, then after ``release_freed_memory()`` (what a trainer now
calls while it waits for the next step's trajectories).
"""

from __future__ import annotations

import argparse
import os
import random

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from train_run import rss_kib  # a sibling script: benchmarks/ is on the path when one of them runs


def rss_gib() -> float:
    return rss_kib() / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="embedded", help="A policy name or path (default: the embedded one).")
    ap.add_argument("--steps", type=int, default=8, help="Updates to run.")
    ap.add_argument("--batch", type=int, default=4, help="Sequences an update.")
    a = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM

    from sesa_graph.embedded import resolve_policy_model
    from sesa_graph.policy.local import keep_freed_memory, release_freed_memory

    keep_freed_memory()
    torch.set_num_threads(2)
    model = AutoModelForCausalLM.from_pretrained(resolve_policy_model(a.model), dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    rng = random.Random(0)
    print(f"loaded: {rss_gib():.2f} GiB")
    print("step  tokens  after update  after release")
    for step in range(a.steps):
        length = rng.choice((256, 512, 768, 1024, 1536))
        ids = torch.randint(0, model.config.vocab_size, (a.batch, length))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss, ids
        held = rss_gib()
        release_freed_memory()
        print(f"{step:>4}  {length:>6}  {held:>8.2f} GiB  {rss_gib():>9.2f} GiB")


if __name__ == "__main__":
    main()
