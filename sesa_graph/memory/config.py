"""Skill-memory configuration. The field descriptions are the documentation; defaults are the paper's.

Paper numbers (SESA): top-3 retrieval, a 300-record pending queue, consolidation every 10 steps when at
least 20 failures are pending, at most 30 distilled per pass, admission only if cosine <= 0.93 to the
bank and to candidates admitted in the same pass, non-seed skills evicted after >= 3 retrievals with
helpful - hurt < 0, and a cap of 800 skills (lowest score out).
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from tools.config_model import ConfigModel, PathValue

MemoryMode = Literal["on", "off", "static", "placebo"]


class MemoryConfig(ConfigModel):
    """How the skill bank is retrieved from, credited, grown and pruned."""

    model_config = ConfigDict(validate_assignment=True)

    mode: MemoryMode = Field(
        "on",
        description="'on': retrieve, credit, distill and evict (SESA). 'off': no bank at all, the solver "
        "prompt has no skills. 'static': seeds + priming only; retrieval and counters run but nothing is "
        "distilled or evicted. 'placebo': the solver gets as many skills, of about the same length, as "
        "'static' retrieval would give, but their text is unrelated to the question (tells whether gains "
        "come from skill content or from a longer prompt); no distillation.",
    )
    embedder: str = Field(
        "embedded",
        description="sentence-transformers model for skill and question embeddings: 'embedded' "
        "(all-MiniLM-L6-v2 from a wheel) or e.g. 'intfloat/e5-base-v2' (production; E5 'query: '/"
        "'passage: ' prefixes are applied when the name contains 'e5'). Fixed for the life of a bank.",
    )
    top_k: int = Field(3, ge=1, le=20, description="Skills retrieved per question (paper: 3).")
    similarity_floor: float | None = Field(
        None,
        ge=-1.0,
        le=1.0,
        description="Drop retrieved skills whose cosine similarity to the question is below this. None "
        "(default, as in the paper) always returns top_k; the paper notes irrelevant skills can distract, "
        "so a floor around 0.3 (MiniLM) is a reasonable experiment.",
    )
    render_max_chars: int = Field(
        1200,
        ge=100,
        description="Longest skills block in the solver prompt, in characters (~300 tokens: three skills of "
        "max_skill_chars fit); skills that would overflow it are left out whole (see prompts.render_skills).",
    )
    failure_source: Literal["frontier", "all"] = Field(
        "frontier",
        description="Which wrong rollouts enter the queue. 'frontier' ([paper]): only those of groups with "
        "0 < p < 1 -- informative failures, where other rollouts of the same question succeeded and the "
        "distiller can contrast them; 'all': every wrong, searched rollout, whatever its group's p.",
    )
    evidence_docs: int = Field(
        4,
        ge=0,
        description="Documents the failing rollout retrieved that are kept with its queue record and shown to "
        "the distiller (so it can say what the search missed); 0 keeps only the queries.",
    )
    evidence_chars: int = Field(
        240, ge=20, description="Each kept evidence document is cut to this many characters."
    )
    queue_cap: int = Field(
        300, ge=1, description="Most pending failures kept (paper: 300); the lowest priority is dropped."
    )
    priority_guided_weight: float = Field(
        1.0,
        ge=0,
        description="Queue priority bonus for a failure whose rollout had relevant skills in its prompt and "
        "still failed (the bank's blind spots; see priority_guided_min_similarity). Ours: the paper ranks "
        "the queue by usefulness and gives no weights (sesa_graph/memory/queue.py has the formula).",
    )
    priority_guided_min_similarity: float | None = Field(
        0.25,
        ge=-1.0,
        le=1.0,
        description="A failure counts as guided only when the best cosine similarity between its question and "
        "the skills shown in its prompt is >= this. Retrieval always returns the top k ([paper], no "
        "similarity_floor), so without a floor (None) every failure of a run with a bank is guided and the "
        "term orders nothing. Ours, for the embedded MiniLM (the seed skills' best match to a question "
        "spans about 0.1-0.35); E5 similarities sit higher, see the GPU configs. Failure records carry "
        "skill_similarity, so a run's failures files show the spread to set it from.",
    )
    priority_repeat_weight: float = Field(
        0.5,
        ge=0,
        description="Queue priority bonus per additional failed rollout of the same question (within a "
        "group and across steps), scaled by the frontier score 4p(1-p) so a p = 0 group's G failures add "
        "nothing. Ours: the paper gives no weights.",
    )
    consolidate_every: int = Field(
        10, ge=1, description="Try a consolidation every this many steps (paper: 10)."
    )
    consolidate_min_pending: int = Field(
        20,
        ge=1,
        description="Consolidate only when at least this many failures are pending (paper: 20): failed "
        "rollouts, a question's repeated failures included, not distinct questions.",
    )
    max_distill_per_pass: int = Field(
        30, ge=1, description="Most failures sent to the distiller in one consolidation (paper: 30)."
    )
    admit_max_cosine: float = Field(
        0.93,
        gt=0,
        le=1.0,
        description="A candidate is admitted only if its cosine similarity to every bank skill, every live "
        "tombstone and every candidate admitted earlier in the same pass is <= this (paper: 0.93).",
    )
    evict_min_retrieved: int = Field(
        3,
        ge=1,
        description="A non-seed skill can be evicted for low utility once retrieved this often (paper: 3).",
    )
    evict_below_score: int = Field(
        0, description="Evict a non-seed skill whose helpful - hurt is below this (paper: 0)."
    )
    bank_cap: int = Field(
        800,
        ge=1,
        description="Most skills in the bank (paper: 800); above it the lowest-scoring non-seed go.",
    )
    tombstone_ttl_steps: int | None = Field(
        200,
        ge=1,
        description="How many steps an evicted skill keeps blocking near-duplicates from re-admission. "
        "None keeps tombstones forever.",
    )
    max_field_chars: int = Field(
        160,
        ge=20,
        description="A distilled skill with any field longer than this is rejected ('too_long'); 160 is what the "
        "solver prompt shows of a field unclipped (prompts.SKILL_FIELD_MAX_CHARS).",
    )
    max_skill_chars: int = Field(
        360, ge=50, description="A distilled skill whose fields together are longer than this is rejected."
    )
    min_content_words: int = Field(
        4,
        ge=1,
        description="A distilled skill needs at least this many distinct content words (not stopwords, not "
        "generic search words like 'search', 'carefully', 'relevant') or it is rejected as 'vacuous'.",
    )
    distiller_max_tokens: int = Field(384, ge=32, description="Token budget of one distiller completion.")
    distiller_view: Literal["full", "masked"] = Field(
        "full",
        description="What the distiller is shown of a failure. 'full': the question, gold and given answers, "
        "the searches and what they returned (the paper's view, for a distiller that can generalise from "
        "them). 'masked': for small distillers, the question and searches with their names replaced by [X] "
        "and what went wrong said in words (answer repeated from the question, answer retrieved but not "
        "picked, not retrieved, a repeated search); a local distiller's reply is then opened with the JSON "
        "object's first key. Measured on tests/fixtures/distiller_failures.jsonl (benchmarks/"
        "distiller_quality.py): see docs/FIXED-MODELS.md.",
    )
    replay: Literal["off", "record", "require"] = Field(
        "off",
        description="Beyond the paper: before a consolidation's candidates are admitted, solve each one's "
        "source failure again, greedily, with the candidate alone in the solver's prompt, and judge the answer "
        "with the run's judge. 'record' stores that evidence with the skill (Skill.replay) and counts it in "
        "the bank version's report (replayed, replay_flipped); 'require' also rejects a candidate whose "
        "replay is still wrong ('replay_no_flip'). One solver rollout per candidate, at the step boundary.",
    )
    distiller_temperature: float = Field(0.3, ge=0, description="Distiller sampling temperature.")
    max_consecutive_distiller_errors: int = Field(
        3,
        ge=1,
        description="After this many consolidations in a row fail with a distiller error, commit() raises "
        "instead of reporting (a dead distiller must not quietly turn 'on' into 'static').",
    )
    seeds_file: PathValue | None = Field(
        None,
        description="YAML of permanent seed skills; None is the 15 shipped in sesa_graph/memory/seeds.yaml.",
    )
    use_seeds: bool = Field(
        True,
        description="Start a new bank with the seed skills. False with no priming_files is an empty bank: the "
        "paper's 'w/o priming' row (`sesa train --no-priming`).",
    )
    priming_files: list[PathValue] = Field(
        default_factory=list,
        description="Extra YAML skill files loaded when a bank is created (e.g. written by `sesa bank mine`); "
        "their skills are evictable.",
    )
    collection: str = Field(
        "skills", description="Chroma collection name (tombstones go to '<name>_tombstones')."
    )
    chroma_host: str | None = Field(
        None,
        description="Use a Chroma server (`chroma run --path DIR --port PORT`) at this host instead of an "
        "in-process PersistentClient; for trainers and rollout workers on other machines. The bank's "
        "state, queue and snapshots stay in the bank directory of the one writer process.",
    )
    chroma_port: int = Field(
        8000, ge=1, le=65535, description="Port of the Chroma server (with chroma_host)."
    )

    @model_validator(mode="after")
    def _consistent(self) -> MemoryConfig:
        if self.consolidate_min_pending > self.queue_cap:
            raise ValueError(
                f"consolidate_min_pending ({self.consolidate_min_pending}) > queue_cap ({self.queue_cap}): "
                "the queue keeps at most queue_cap questions, so consolidation would start only on repeated "
                "failures; lower the first or raise the second"
            )
        if self.max_field_chars > self.max_skill_chars:
            raise ValueError(
                f"max_field_chars ({self.max_field_chars}) > max_skill_chars ({self.max_skill_chars}); "
                "one field may not be longer than the whole skill"
            )
        return self
