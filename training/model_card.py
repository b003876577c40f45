"""The model card of a trained policy: what it was trained from, by which run, and how to load it.

TRL writes a generic card ("a fine-tuned version of None" for a local base model) into the checkpoint
directory; the final policy and the last checkpoint get this one instead, which names the base model as the
config names it, the run and the step it reached.
"""

from __future__ import annotations

from pathlib import Path

from sesa_graph.config import RunConfig


def model_card(cfg: RunConfig, role: str, run_dir: Path, steps: int) -> str:
    pcfg = cfg.solver_policy if role == "solver" else cfg.proposer_policy
    base = pcfg.train_model or pcfg.model
    other = "proposer" if role == "solver" else "solver"
    return f"""---
library_name: transformers
base_model_relation: finetune
tags: [sesa-graph, grpo, trl, self-play]
---

# {cfg.name} / {role}

The **{role}** policy of the sesa-graph run `{cfg.name}` (`{run_dir}`), after {steps} self-play steps of
GRPO (TRL), trained from **`{base}`** as the run's config names it. The {other} policy of the same run is in
`policies/{other}`; the run's settings are in `config.yaml` and its curves in `metrics.jsonl`.

Load it with transformers:

```python
from transformers import AutoModelForCausalLM, AutoTokenizer

model = AutoModelForCausalLM.from_pretrained("{run_dir / "policies" / role}")
tokenizer = AutoTokenizer.from_pretrained("{run_dir / "policies" / role}")
```

or roll it out: `sesa rollout --model {run_dir / "policies" / role} "a question"`.
"""


def write_model_card(cfg: RunConfig, role: str, run_dir: Path, steps: int, *dirs: Path) -> None:
    text = model_card(cfg, role, run_dir, steps)
    for d in dirs:
        if d.is_dir():
            (d / "README.md").write_text(text)
