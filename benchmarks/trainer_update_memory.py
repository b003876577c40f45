"""One CPU trainer's update alone, as the GRPO trainer runs it: its peak resident size with and without
gradient checkpointing, AdamW foreach or fused, and glibc keeping freed memory or not.

The warm 135M in fp32 master weights, TRL's fused LM head (log-probs in tiles, never the whole logits), bf16
autocast, 2 threads; an update is 4 single-sequence passes of SEQ, SEQ-200, ... tokens (a third of each
masked like a prompt) then one optimizer step; 3 updates. Prints the resident size after each update, after
``malloc_trim``, and the process's peak (``ru_maxrss``).

    .venv/bin/python benchmarks/trainer_update_memory.py --seq 1500 [--checkpointing] [--fused] [--no-keep]
"""

from __future__ import annotations

import argparse
import os
import resource
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def rss_gib() -> float:
    with open("/proc/self/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0]) / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seq", type=int, default=1500, help="Tokens of the update's longest pass.")
    ap.add_argument("--checkpointing", action="store_true", help="Recompute activations in the backward.")
    ap.add_argument("--fused", action="store_true", help="AdamW fused instead of foreach.")
    ap.add_argument("--no-keep", action="store_true", help="glibc's default freeing, not keep_freed_memory.")
    ap.add_argument("--model", default="embedded-warm")
    a = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    from sesa_graph.embedded import resolve_policy_model
    from sesa_graph.policy.local import keep_freed_memory, release_freed_memory

    if not a.no_keep:
        keep_freed_memory()
    torch.set_num_threads(2)
    model = AutoModelForCausalLM.from_pretrained(resolve_policy_model(a.model), dtype=torch.float32)
    add_fused_lm_head(model, temperature=0.7)
    if a.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=a.fused, foreach=None if a.fused else True)
    print(f"loaded: {rss_gib():.2f} GiB")
    t0 = time.time()
    for step in range(3):
        for p in range(4):
            n = a.seq - 200 * p
            ids = torch.randint(0, model.config.vocab_size, (1, n))
            labels = ids.clone()
            labels[:, : n // 3] = -100
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = model(
                    input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels, fused_lm_head=True
                )
            out.log_probs.sum().backward()
            del out
        opt.step()
        opt.zero_grad(set_to_none=True)
        held = rss_gib()
        release_freed_memory()
        print(f"update {step}: {held:.2f} GiB resident, {rss_gib():.2f} after malloc_trim")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(
        f"checkpointing {a.checkpointing}, fused {a.fused}, keep {not a.no_keep}, seq {a.seq}: peak {peak:.2f} GiB, "
        f"{time.time() - t0:.1f} s for 3 updates"
    )


if __name__ == "__main__":
    main()
