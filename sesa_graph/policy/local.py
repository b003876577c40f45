"""In-process transformers policy with micro-batching (the embedded default, CPU or GPU).

Concurrent ``generate`` calls (e.g. the G rollouts of a group, each its own LangGraph subgraph) are
queued and served together by one left-padded, KV-cached ``model.generate`` call, which is where the
throughput on a small model comes from. Log-probs of the sampled tokens are ``log_softmax(logits /
temperature)`` of the raw logits ``generate`` returns for each step -- the same quantity TRL's GRPO trainer
computes. (A second forward pass over the finished sequences gives the same numbers but re-reads prompt
and completion once more, and on CPU re-reading the context is most of a turn's cost.)
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from sesa_graph.embedded import resolve_policy_model
from sesa_graph.policy.base import GenerationRequest, GenerationResult
from sesa_graph.policy.kv_cache import (
    Prefix,
    PrefixKVCache,
    batch_cache,
    batch_layout,
    register_gqa_attention,
    row_states,
)
from sesa_graph.policy.stops import cut_at_stop, first_stop
from sesa_graph.policy.templated import render_chat

log = logging.getLogger(__name__)


def keep_freed_memory() -> None:
    """Ask glibc to keep freed blocks instead of returning large ones to the kernel at once.

    Every decoding step allocates and frees multi-megabyte tensors; with glibc's defaults each becomes an
    mmap/munmap pair, and page faults ate about a third of the CPU time of an evaluation (measured: 386M
    minor faults, 593 s system time in 16 min). With these thresholds one 16 x 48-token batch went from
    2.7M faults and 20.2 s to 0.23M faults and 18.5 s. The cost is a higher, flatter resident size.
    """
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's mallopt parameter numbers
        libc.mallopt(m_mmap_threshold, 1 << 30)
        libc.mallopt(m_trim_threshold, (1 << 31) - 1)
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to tune
        pass


def release_freed_memory() -> None:
    """Give the heap's free pages back to the kernel (glibc's ``malloc_trim``).

    With :func:`keep_freed_memory` a process never shrinks: a trainer that waits for a step's rollouts keeps
    the high-water mark of its last update, free blocks included, while the vLLM servers and the orchestrator
    need memory (a 12-step SESA run stalled at step 9 with its trainers holding 7.2 and 5.4 GiB and the machine
    full, docs/EXPERIMENT.md). Called between updates, it costs the next update's first page faults only.
    """
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to give back this way
        pass


class _RowStops:
    """Stopping criterion: a row is done at EOS, at its own token budget or at one of its stop strings."""

    def __init__(self, tokenizer: Any, prompt_len: int, stops: list[tuple[str, ...]], budgets: list[int]):
        self.tokenizer = tokenizer
        self.prompt_len = prompt_len
        self.stops = stops
        self.budgets = budgets
        self.done = [False] * len(stops)

    def __call__(self, input_ids: torch.Tensor, scores: Any = None, **kwargs: Any) -> torch.Tensor:
        n = input_ids.shape[1] - self.prompt_len
        for i, stops in enumerate(self.stops):
            if self.done[i]:
                continue
            if n >= self.budgets[i]:
                self.done[i] = True
            elif stops:
                tail = self.tokenizer.decode(input_ids[i, max(self.prompt_len, input_ids.shape[1] - 16) :])
                self.done[i] = first_stop(tail, stops) is not None
        return torch.tensor(self.done, device=input_ids.device)


class LocalPolicy:
    """A ``PolicyClient`` backed by a transformers causal LM in this process."""

    def __init__(
        self,
        model: str = "embedded",
        device: str = "cpu",
        dtype: str = "float32",
        max_batch_size: int = 16,
        batch_wait_ms: float = 5.0,
        batch_max_wait_ms: float = 100.0,
        max_context: int | None = None,
        threads: int | None = None,
        kv_cache_mb: int = 1024,
        chat_template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        # Denormal activations make CPU matmuls ~3x slower on this model (measured); flushing them to
        # zero changes nothing a sampler could notice.
        torch.set_flush_denormal(True)
        if device == "cpu":
            keep_freed_memory()
        if threads:  # on a CPU shared with other busy processes, one thread is often several times faster
            torch.set_num_threads(threads)
        self.name = model
        self.chat_template_kwargs = dict(chat_template_kwargs or {})  # PolicyConfig.chat_template_kwargs
        self.path = resolve_policy_model(model)
        self.device = torch.device(device)
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        self.model = AutoModelForCausalLM.from_pretrained(self.path, dtype=getattr(torch, dtype))
        if self.model.config._attn_implementation == "sdpa":
            self.model.set_attn_implementation(register_gqa_attention())
        self.model.to(self.device).eval()
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_ms / 1000
        self.batch_max_wait_s = max(batch_max_wait_ms, batch_wait_ms) / 1000
        self.max_context = max_context or int(getattr(self.model.config, "max_position_embeddings", 2048))
        self.vocab_size = int(self.model.get_input_embeddings().num_embeddings)
        self.eos_ids = self._eos_ids()
        self.kv_cache = PrefixKVCache(kv_cache_mb * 2**20 // self._kv_bytes_per_token())
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.eos_ids[0]
        # one queue and drain task per event loop: the rollout loop and a background consolidation
        # thread's loop may both call generate; the model lock serializes the actual generation
        self._queues: dict[asyncio.AbstractEventLoop, list[tuple[GenerationRequest, asyncio.Future]]] = {}
        self._workers: dict[asyncio.AbstractEventLoop, asyncio.Task] = {}
        self._model_lock = threading.Lock()
        # One generation thread: with keep_freed_memory() every thread's malloc arena keeps its own peak, and
        # asyncio.to_thread's pool spread batches over several (an eval's RSS reached 15 GB).
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sesa-generate")
        self.version = 0
        self.stats = {"batches": 0, "requests": 0, "generated_tokens": 0, "generate_s": 0.0}

    def _kv_bytes_per_token(self) -> int:
        c = self.model.config
        heads = getattr(c, "num_key_value_heads", None) or c.num_attention_heads
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        return 2 * c.num_hidden_layers * heads * head_dim * self.model.dtype.itemsize

    def _eos_ids(self) -> list[int]:
        ids = self.model.generation_config.eos_token_id
        ids = ids if isinstance(ids, list) else [ids]
        if self.tokenizer.eos_token_id is not None:
            ids.append(self.tokenizer.eos_token_id)
        return sorted({int(i) for i in ids if i is not None})

    # ---- token helpers shared by the nodes -------------------------------------------------------
    def encode_messages(self, messages: list[dict[str, str]]) -> list[int]:
        return render_chat(self.tokenizer, messages, **self.chat_template_kwargs)

    def encode_text(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    # ---- async batching front --------------------------------------------------------------------
    async def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        loop = asyncio.get_running_loop()
        queue = self._queues.setdefault(loop, [])
        futures = []
        for r in requests:
            fut = loop.create_future()
            problem = self.check_prompt_ids(r.prompt_ids)
            if problem:  # never batched: an out-of-range id fails the whole model call (a CUDA assert on GPU)
                fut.set_exception(ValueError(problem))
            else:
                queue.append((r, fut))
            futures.append(fut)
        worker = self._workers.get(loop)
        if worker is None or worker.done():
            for old in [
                lp for lp in self._workers if lp.is_closed()
            ]:  # forget loops of finished asyncio.run()s
                self._workers.pop(old, None)
                self._queues.pop(old, None)
            self._workers[loop] = loop.create_task(self._drain(queue))
        return list(await asyncio.gather(*futures))

    def check_prompt_ids(self, ids: list[int] | None) -> str | None:
        """Why these prompt ids cannot be generated from (None if they can)."""
        if ids is None:
            return None
        bad = [
            t for t in ids if not isinstance(t, int) or isinstance(t, bool) or not 0 <= t < self.vocab_size
        ]
        if bad:
            return f"prompt token id {bad[0]!r} is outside the vocabulary [0, {self.vocab_size})"
        return None

    async def _drain(self, queue: list[tuple[GenerationRequest, asyncio.Future]]) -> None:
        while queue:
            await self._gather_batch(queue)
            key = _sampling_key(queue[0][0])
            batch = [item for item in queue if _sampling_key(item[0]) == key][: self.max_batch_size]
            taken = {id(item) for item in batch}
            queue[:] = [item for item in queue if id(item) not in taken]
            await self._run_batch(batch)

    async def _run_batch(self, batch: list[tuple[GenerationRequest, asyncio.Future]]) -> None:
        """Generate for ``batch``; if the batch fails, each request is retried alone, so a request that
        cannot be served fails only its own caller."""
        run = asyncio.get_running_loop().run_in_executor
        try:
            results = await run(self._executor, self.generate_sync, [r for r, _ in batch])
        except Exception as exc:  # noqa: BLE001 - handed to the callers, never raised in the drain task
            if len(batch) == 1:
                if not batch[0][1].done():
                    batch[0][1].set_exception(exc)
                return
            log.warning("a batch of %d failed (%s): retrying its requests one by one", len(batch), exc)
            for item in batch:
                await self._run_batch([item])
            return
        for (_, fut), res in zip(batch, results):
            if not fut.done():
                fut.set_result(res)

    async def _gather_batch(self, queue: list) -> None:
        """Wait until no request has joined for ``batch_wait_s`` (or the batch is full, or
        ``batch_max_wait_s`` has passed). Rollouts reach their next turn staggered by their searches, and a
        fixed 5 ms window from the first arrival closed between them: in benchmarks/rollout.py 32 rollouts
        ran as 6 generate calls of 12.5 requests (+21% over the same requests sent at once); with this
        window, 5 calls of 15 (+2.9%)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.batch_max_wait_s
        seen = -1
        while len(queue) != seen and len(queue) < self.max_batch_size:
            seen = len(queue)
            left = deadline - loop.time()
            if left <= 0:
                break
            await asyncio.sleep(min(self.batch_wait_s, left))

    # ---- the batched generate ----------------------------------------------------------------------
    def _prompt_ids(self, r: GenerationRequest) -> list[int]:
        return list(r.prompt_ids) if r.prompt_ids is not None else self.encode_messages(r.messages or [])

    def _budget(self, prompt_len: int, wanted: int) -> int:
        room = self.max_context - prompt_len
        if wanted > room:
            log.warning(
                "requested %d new tokens but the prompt has %d of %d context tokens: clamped to %d",
                wanted,
                prompt_len,
                self.max_context,
                max(room, 0),
            )
        return max(min(wanted, room), 0)

    @torch.inference_mode()
    def generate_sync(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        """Generate for requests that share temperature and top_p, in one ``model.generate`` call."""
        sp = requests[0].sampling
        prompts = [self._prompt_ids(r) for r in requests]
        budgets = [self._budget(len(p), r.sampling.max_tokens) for p, r in zip(prompts, requests)]
        live = [i for i, b in enumerate(budgets) if b > 0]
        results: list[GenerationResult | None] = [None] * len(requests)
        for i, b in enumerate(budgets):
            if b == 0:
                results[i] = GenerationResult("", [], [], prompts[i], "length")
        if not live:
            return results  # type: ignore[return-value]
        reuse = self.kv_cache.max_tokens > 0
        prefixes = [self.kv_cache.lookup(prompts[i]) if reuse else Prefix(0, None) for i in live]
        input_ids, attention, cached = batch_layout([prompts[i] for i in live], prefixes, self.pad_id)
        width = input_ids.shape[1]
        input_ids, attention = input_ids.to(self.device), attention.to(self.device)
        past = batch_cache(prefixes, cached, self.model.config, width + max(budgets[i] for i in live))
        stopper = _RowStops(
            self.tokenizer,
            width,
            [tuple(requests[i].sampling.stop) for i in live],
            [budgets[i] for i in live],
        )
        greedy = sp.temperature <= 0
        if sp.seed is not None:
            torch.manual_seed(sp.seed)
        t0 = time.perf_counter()
        with self._model_lock:
            out = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                past_key_values=past,
                use_cache=True,
                max_new_tokens=max(budgets[i] for i in live),
                do_sample=not greedy,
                temperature=None if greedy else sp.temperature,
                top_p=None if greedy else sp.top_p,
                top_k=None if greedy else 0,
                stopping_criteria=[stopper],
                pad_token_id=self.pad_id,
                eos_token_id=self.eos_ids,
                return_dict_in_generate=True,
                output_logits=True,
            )
            gen = out.sequences[:, width:]
            completions = []
            for row, i in enumerate(live):
                ids = gen[row].tolist()[: budgets[i]]
                finish = "length"
                for j, t in enumerate(ids):
                    if t in self.eos_ids:
                        ids, finish = ids[: j + 1], "eos"
                        break
                keep, stop = cut_at_stop(self.tokenizer, ids, tuple(requests[i].sampling.stop))
                if stop is not None:
                    ids, finish = ids[:keep], "stop"
                completions.append((ids, finish, stop))
            logprobs = _step_logprobs(
                out.logits, gen, [len(c[0]) for c in completions], 1.0 if greedy else sp.temperature
            )
            if reuse:
                self._keep_states(
                    out.past_key_values, attention, [prompts[i] for i in live], [c[0] for c in completions]
                )
        self.stats["batches"] += 1
        self.stats["requests"] += len(live)
        self.stats["generated_tokens"] += sum(len(c[0]) for c in completions)
        self.stats["generate_s"] += time.perf_counter() - t0
        for row, i in enumerate(live):
            ids, finish, stop = completions[row]
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            results[i] = GenerationResult(text, ids, logprobs[row], prompts[i], finish, stop)  # type: ignore[arg-type]
        return results  # type: ignore[return-value]

    def _keep_states(
        self, cache: Any, attention: torch.Tensor, prompts: list[list[int]], completions: list[list[int]]
    ) -> None:
        """Store each row's states for prompt + completion (the last sampled token never went through the
        model, so its states do not exist)."""
        width = attention.shape[1]
        steps = cache.get_seq_length() - width  # generated tokens that were fed back in
        for row, (prompt, ids) in enumerate(zip(prompts, completions)):
            n_gen = min(len(ids), steps)
            positions = torch.cat(
                [attention[row].nonzero()[:, 0], torch.arange(width, width + n_gen, device=attention.device)]
            )
            self.kv_cache.store(prompt + ids[:n_gen], row_states(cache, positions, row))

    # ---- weights -----------------------------------------------------------------------------------
    def reload(self, weights_dir: str | Path) -> None:
        """Load new weights (safetensors files in ``weights_dir``) between batches."""
        from safetensors.torch import load_file

        files = sorted(Path(weights_dir).glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"no *.safetensors in {weights_dir}")
        state: dict[str, torch.Tensor] = {}
        for f in files:
            state.update(load_file(str(f)))
        with self._model_lock:
            missing, unexpected = self.model.load_state_dict(state, strict=False)
            real_missing = [k for k in missing if "lm_head" not in k]  # tied to the embeddings
            if real_missing or unexpected:
                raise ValueError(
                    f"weights in {weights_dir} do not fit {self.name}: missing {real_missing[:5]}, "
                    f"unexpected {list(unexpected)[:5]}"
                )
            self.kv_cache.clear()  # states computed by the old weights
            self.version += 1


def _step_logprobs(
    logits: tuple[torch.Tensor, ...], gen: torch.Tensor, lengths: list[int], temp: float
) -> list[list[float]]:
    """log p of each row's first ``lengths[row]`` generated tokens from the per-step raw logits."""
    out: list[list[float]] = [[] for _ in lengths]
    for step in range(max(lengths, default=0)):
        lp = (
            torch.log_softmax(logits[step].float() / temp, dim=-1)
            .gather(-1, gen[:, step : step + 1])[:, 0]
            .tolist()
        )
        for row, n in enumerate(lengths):
            if step < n:
                out[row].append(lp[row])
    return out


def _sampling_key(r: GenerationRequest) -> tuple:
    s = r.sampling
    return (s.temperature <= 0, s.temperature, s.top_p, s.seed)
