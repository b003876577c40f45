"""The settings of one eval (``sesa eval``). Kept apart from the driver so the CLI imports it cheaply."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from sesa_eval.records import weights_fingerprint
from sesa_graph.config import JudgeConfig, SolverConfig
from sesa_graph.model_config import EndpointConfig, PolicyConfig
from tools.config import SearchConfig
from tools.config_model import ConfigModel, PathValue

BankMode = Literal["closed", "off", "on", "placebo", "oracle"]
BANK_MODES: tuple[str, ...] = ("closed", "off", "on", "placebo", "oracle")
SKILL_MODES: tuple[str, ...] = ("on", "placebo")  # the modes that read the bank
LOCAL_JUDGE_TIMEOUT_S = 600.0
# how long and how often the judge is tried changes no verdict it gives
_JUDGE_NOT_IDENTITY = {"timeout_s", "connect_timeout_s", "retries", "max_consecutive_failures", "api_key_env"}


class EvalSettings(ConfigModel):
    """One eval. The field descriptions are the CLI's help texts."""

    name: str = Field(
        description="Eval name; output goes to <out-root>/<name>/. Rerunning the same name resumes."
    )
    out_root: PathValue = Field(Path("evals"), description="Directory holding the evals.")
    datasets: list[str] = Field(
        default_factory=list,
        description="Datasets, comma-separated: names in "
        "--data-dir, .jsonl paths, or hf:<repo>[:<config>[:<split>]]. Default: every "
        "*.jsonl in --data-dir.",
    )
    data_dir: PathValue | None = Field(
        None,
        description="Directory of FlashRAG-style JSONL datasets "
        '({"id", "question", "golden_answers"} per line), named by file stem.',
    )
    limit: int | None = Field(None, ge=1, description="Evaluate the first N questions of each dataset.")
    subset: Literal["all", "answerable"] = Field(
        "all",
        description="Questions that get rollouts: all, or only the answerable ones (a gold answer within the "
        "search's reach, computed first and cheaply; see sesa_eval/answerability.py). 'answerable' spends "
        "the rollouts where an agent can score: on the embedded 10k-article corpus about 1 benchmark "
        "question in 4: 434 of the 1,860 shared ones (the rest are counted in the report, not run).",
    )
    bank_modes: list[BankMode] = Field(
        default_factory=lambda: ["off"],
        description="Modes to run side by side (paired: same questions and seeds), comma-separated: off "
        "(no skills), on (the --bank's top-k skills), placebo (length-matched unrelated skills), and the "
        "controls closed (closed-book floor: the solver answers at once, no search) and oracle (open-book "
        "ceiling: the question's answer-bearing document is the first observation; questions without one "
        "are counted, not run). E.g. closed,off,on,oracle.",
    )
    bank: PathValue | None = Field(
        None,
        description="Skill bank directory (or a run directory holding memory/) "
        "for modes on and placebo; opened read-only. Also checked for hygiene.",
    )
    top_k: int = Field(
        3, ge=1, le=20, description="Skills retrieved per question in modes on/placebo (paper: 3)."
    )
    seeds: int | None = Field(
        None,
        ge=1,
        le=100,
        description="Sampled repeats per question (seeds 0..N-1, "
        "at the solver temperature); reports mean and std over seeds. Default: one "
        "greedy rollout.",
    )
    concurrency: int = Field(16, ge=1, description="Questions in flight at once.")
    max_errors: int = Field(
        10,
        ge=0,
        description="Stop after more than this many failed rollouts (search "
        "errors, exceptions) or failed LLM judgments; the results so far are kept.",
    )
    target_pool: list[str] = Field(
        default_factory=list,
        description="Training target pool(s) to check for eval "
        "questions (hygiene): 'embedded' (the pool built from the embedded corpus), "
        "an SSP pool JSONL, or a file with one target per line.",
    )
    policy: PolicyConfig = Field(default_factory=PolicyConfig, description="The solver policy.")
    search: SearchConfig = Field(default_factory=SearchConfig, description="The search tool.")
    solver: SolverConfig = Field(default_factory=SolverConfig, description="The solver loop.")
    judge: JudgeConfig = Field(
        default_factory=JudgeConfig,
        description="Answer scoring (default: exact match only; kind 'model' (a fixed model of `models`) "
        "or 'openai' (an endpoint) adds the paper's LLM judge on a miss; 'policy' lets the evaluated "
        "model grade itself, warned).",
    )
    models: dict[str, EndpointConfig] = Field(
        default_factory=dict,
        description="Fixed models by name, from the run config's `models:`; judge kind 'model' names one.",
    )
    judge_fallback: str | None = Field(
        None,
        description="Why the judge is not the one the run config chose (its fetched model is not on this "
        "machine), stated in the report; None when it is.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> EvalSettings:
        if not self.bank_modes:
            raise ValueError(f"--bank-modes is empty; choose from {', '.join(BANK_MODES)}")
        if len(set(self.bank_modes)) != len(self.bank_modes):
            raise ValueError(f"--bank-modes lists a mode twice: {','.join(self.bank_modes)}")
        needs = [m for m in self.bank_modes if m in SKILL_MODES]
        if needs and self.bank is None:
            raise ValueError(
                f"bank mode(s) {','.join(needs)} need a skill bank: pass --bank DIR (a bank "
                "directory or a run directory with memory/)"
            )
        if self.judge.kind == "model" and self.judge.endpoint not in self.models:
            known = ", ".join(sorted(self.models)) or "none"
            raise ValueError(
                f"judge kind 'model' names model {self.judge.endpoint!r}, which is not defined here (models: "
                f"{known}); pass --config with a run config whose `models:` defines it, or give an endpoint: "
                "--judge URL --judge-model M"
            )
        if self._local_judge() and "timeout_s" not in self.judge.model_fields_set:
            # judge requests queue behind the solver's batches on a local policy (and a local judge model
            # shares the CPU with it): 30 s would fail them
            self.judge = self.judge.model_copy(update={"timeout_s": LOCAL_JUDGE_TIMEOUT_S})
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", self.name):
            shown = self.name if len(self.name) <= 100 else self.name[:100] + "..."
            raise ValueError(
                f"eval name {shown!r}: use letters, digits, '.', '_' and '-' only, at most 100 characters"
            )
        return self

    def _local_judge(self) -> bool:
        if self.judge.kind == "policy":
            return self.policy.backend == "local"
        serve = self.models[self.judge.endpoint].serve if self.judge.kind == "model" else None
        return serve is not None and serve.backend == "local"

    @property
    def out_dir(self) -> Path:
        return self.out_root / self.name

    @property
    def seed_list(self) -> list[int | None]:
        return [None] if self.seeds is None else list(range(self.seeds))

    def identity(self) -> dict[str, Any]:
        """The settings that decide a record's result: cached records are reused only if these match.
        (The bank is checked per record: mode-off records stay valid when a bank is added.)"""
        p = self.policy
        return {
            "model": p.model,
            "weights": weights_fingerprint(p.model) if p.backend in ("local", "vllm") else None,
            "backend": p.backend,
            "base_url": p.base_url,
            "dtype": p.dtype,
            "search": self.search.model_dump(
                mode="json",
                exclude={
                    "timeout_s",
                    "connect_timeout_s",
                    "retries",
                    "backoff_s",
                    "device",
                    "encode_batch_size",
                },
            ),
            "solver": self.solver.model_dump(mode="json", exclude={"group_size"}),
            "judge": self.judge.model_dump(mode="json", exclude=_JUDGE_NOT_IDENTITY),
            "top_k": self.top_k,
            # which model judges decides verdicts: a cached record is reused only under the same one
            **({"judge_model": self._judge_model()} if self.judge.kind == "model" else {}),
        }

    def _judge_model(self) -> dict[str, Any]:
        ep = self.models[self.judge.endpoint]
        if ep.serve is not None:
            p = ep.serve
            return {"model": p.model, "weights": weights_fingerprint(p.model), "dtype": p.dtype}
        return {"base_url": ep.base_url, "model": ep.model, "tokenizer": ep.tokenizer, "api": ep.api}


def default_name(model: str) -> str:
    """A deterministic eval name from a model name, so rerunning the same command resumes."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model.strip("/")).strip("-._") or "eval"
