"""How much of a policy one optimizer step at a GRPO learning rate moves: bf16 weights (the trainer before
fp32 master weights: `from_pretrained(dtype=bfloat16)` and AdamW on them) against fp32 master weights with bf16
autocast (the trainer now). Prints the share of weights that changed after each of --steps AdamW steps.

    .venv/bin/python benchmarks/master_weights.py [--model embedded] [--lr 1e-6] [--steps 5]

The config now refuses the first layout (sesa_graph.precision); this reproduces it at the optimizer, on the same
model, tokens and loss (next-token cross-entropy on a few corpus sentences), so the figures are comparable.
The full trainer path is measured by tests/training/test_trainer_ranks.py (one GRPO update at lr 1e-6).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TEXT = [
    "Richard Strauss was a German composer of the late Romantic and early modern eras.",
    "The Danube is the second-longest river in Europe, after the Volga.",
    "Marie Curie was the first woman to win a Nobel Prize.",
]


def share_changed(model_dir: str, layout: str, lr: float, steps: int) -> list[float]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.pad_token = tok.pad_token or tok.eos_token
    dtype = torch.bfloat16 if layout == "bf16-weights" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    start = {k: v.detach().clone() for k, v in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    batch = tok(TEXT, return_tensors="pt", padding=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    shares = []
    for _ in range(steps):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=layout == "fp32-master+bf16-autocast"):
            loss = model(**batch, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        changed = sum(int((p.detach() != start[k]).sum()) for k, p in model.named_parameters())
        shares.append(changed / sum(p.numel() for p in start.values()))
    return shares


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--model", default="embedded", help="'embedded' (SmolLM2-135M from its wheel) or a model dir"
    )
    ap.add_argument("--lr", type=float, default=1e-6, help="AdamW learning rate (the GPU configs': 1e-6)")
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    from sesa_graph.embedded import resolve_policy_model

    model = resolve_policy_model(args.model)
    print(f"model {args.model}, AdamW lr {args.lr:g}: share of weights changed after each step")
    for layout in ("bf16-weights", "fp32-master+bf16-autocast"):
        shares = share_changed(model, layout, args.lr, args.steps)
        print(f"  {layout:28s} " + "  ".join(f"{s:7.2%}" for s in shares))


if __name__ == "__main__":
    main()
