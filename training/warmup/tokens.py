"""Tokens and masks of a warm-up example: tokenized turn by turn like a rollout, only the policy's own
tokens trained."""

from __future__ import annotations

from typing import Any

from training.questions.examples import WarmupExample, is_trained


def prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Chat template with the generation prompt: what ``LocalPolicy.encode_messages`` returns."""
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out)


def text_ids(tokenizer: Any, text: str) -> list[int]:
    """What ``LocalPolicy.encode_text`` returns (no special tokens added)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def end_of_turn_id(tokenizer: Any) -> int:
    """The token the chat template closes an assistant message with (``<|im_end|>`` for SmolLM2 and
    Qwen, ``<|eot_id|>`` for Llama 3), else the tokenizer's EOS."""
    probe = "\u2063probe\u2063"
    try:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": probe}], tokenize=False
        )
        tail = text[text.index(probe) + len(probe) :]
        ids = text_ids(tokenizer, tail) if tail else []
        special = set(tokenizer.all_special_ids) | set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
        if ids and ids[0] in special:
            return int(ids[0])
    except Exception:  # noqa: BLE001, S110 - no chat template or an exotic one: fall back to EOS
        pass
    if tokenizer.eos_token_id is None:
        raise ValueError("the tokenizer has neither a chat template end-of-turn token nor an EOS token")
    return int(tokenizer.eos_token_id)


def encode_example(ex: WarmupExample, tokenizer: Any, eot_id: int | None = None) -> dict[str, list[int]]:
    """``input_ids`` (prompt + completion) and ``completion_mask`` (1 on the policy's own tokens: its turns
    and the closing end-of-turn token; 0 on the prompt and on injected observations)."""
    ids = prompt_ids(tokenizer, ex.messages)
    mask = [0] * len(ids)
    for text, part in ex.segments:
        seg = text_ids(tokenizer, text)
        ids += seg
        mask += [int(is_trained(part))] * len(seg)
    ids.append(end_of_turn_id(tokenizer) if eot_id is None else eot_id)
    mask.append(1)
    return {"input_ids": ids, "completion_mask": mask}
