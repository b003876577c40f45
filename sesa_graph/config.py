"""Typed run configuration. Every field's description is its documentation; unknown keys are errors.

A run is configured by one YAML file in ``configs/`` (``configs/tiny-cpu.yaml`` is the default); CLI
flags override single fields. ``sesa config show`` prints the resolved values and where each came from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from sesa_graph.cluster_config import ClusterConfig
from sesa_graph.config_yaml import ConfigError, apply_overrides, read_config_file, validation_message
from sesa_graph.memory.config import MemoryConfig
from sesa_graph.model_config import (
    EndpointConfig,
    ModelRef,
    PolicyConfig,
    Strict,
    chat_template_kwargs_field,
    default_models,
)
from sesa_graph.train_config import TrainConfig, check_train_layout
from tools.config import SearchConfig
from tools.config_model import check_http_url
from tools.endpoint_settings import endpoint_settings

MAX_RUN_NAME = 100
DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "tiny-cpu.yaml"


class SolverConfig(Strict):
    """The solver's multi-turn search loop."""

    max_turns: int = Field(
        10,
        ge=1,
        le=50,
        description="Most assistant turns (generations) per rollout, the last chance included ([paper] at "
        "most 10 assistant turns): the max_turns-th turn is told no searches are left.",
    )
    max_tokens_per_turn: int = Field(160, ge=8, description="Token budget of one assistant turn.")
    max_total_tokens: int = Field(
        2048, ge=64, description="Budget of the whole rollout (prompt excluded), injected documents included."
    )
    temperature: float = Field(
        1.0, ge=0, description="Sampling temperature in training (evaluation is greedy)."
    )
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling threshold.")
    group_size: int = Field(
        5, ge=1, description="G: solver rollouts per question (paper: 5). GRPO needs >= 2."
    )
    search_k: int = Field(3, ge=1, description="Documents returned per search call.")
    doc_chars: int = Field(
        400,
        ge=50,
        description="Each retrieved document is cut to this many characters in "
        "the prompt, so small-context models keep room for several turns.",
    )
    force_final_answer: bool = Field(
        False,
        description="On the last generation the environment writes the opening "
        "<answer> tag (not trained on), so a rollout that ran out of searches still "
        "answers. Off by default, as in the paper's evaluation; the tiny CPU config "
        "turns it on because its 3-turn rollouts otherwise mostly end max_turns with "
        "reward 0 and no GRPO signal.",
    )


class ProposerConfig(Strict):
    """The proposer's search-then-ask loop and the validity checks on its question."""

    max_turns: int = Field(
        10,
        ge=1,
        description="Most assistant turns before the proposer must write a question ([SSP] 10).",
    )
    max_tokens_per_turn: int = Field(512, ge=8, description="Token budget of one proposer turn.")
    max_total_tokens: int = Field(
        8192,
        ge=64,
        description="Budget of the proposer's whole rollout (prompt excluded), retrieved documents included "
        "([SSP] 8192 response tokens). Each search of k documents of doc_chars costs about k * doc_chars / 4 "
        "tokens, so an n-hop question needs room for n searches and the question turn.",
    )
    temperature: float = Field(1.0, ge=0, description="Sampling temperature.")
    min_words: int = Field(
        4,
        ge=1,
        description="Shortest valid question, in words. [SSP] uses 10; 4 is our default so the tiny CPU model's "
        "short questions can pass (the GPU configs set 10).",
    )
    max_words: int | None = Field(
        60,
        ge=2,
        description="Longest valid question, in words; None: no cap ([SSP] caps only the characters; the GPU "
        "configs set null). 60 keeps the tiny CPU model's rambling out.",
    )
    max_chars: int = Field(
        1000, ge=10, description="Longest valid question, in characters ([SSP] 1000; this project had 400)."
    )
    search_rule: Literal["hops", "ssp"] = Field(
        "hops",
        description="How many searches a valid proposal needs. 'hops' (ours): at least two distinct queries "
        "when hops >= 2, one otherwise. 'ssp' ([SSP]): at least two queries whatever the hop count, and no "
        "query repeated word for word. The GPU configs use 'ssp'; the tiny CPU model rarely searches twice.",
    )
    rag_check: bool = Field(
        True,
        description="Require that a fixed reader model (rag_reader), reading the proposer's evidence mixed with "
        "distractors, answers the question with the target ([paper]/[SSP]: RAG verification).",
    )
    rag_distractors: int = Field(
        4, ge=0, description="Distractor documents mixed into the retrieval-augmented check ([paper] 4)."
    )
    rag_distractor_source: Literal["random", "question"] = Field(
        "random",
        description="Where distractors come from: 'random' -- documents retrieved for other, randomly drawn "
        "targets of the pool (unrelated to the question, as [SSP]'s sampled distractors); 'question' -- the "
        "question's own top search hits (harder negatives, but they may carry the answer and so weaken the check).",
    )
    rag_reader: ModelRef = Field(
        default_factory=ModelRef,
        description="The fixed model that answers in the retrieval-augmented check (not the proposer or solver "
        "being trained).",
    )
    rag_evidence_docs: int | None = Field(
        None,
        ge=1,
        description="Most of the proposer's retrieved documents (distinct, in retrieval order) the RAG reader "
        "gets. None: all of them ([SSP]: every <information> block of the rollout). A cap below max hops x "
        "search_k drops the last hops' evidence (6 used to cut a 3-hop proposal's third search).",
    )
    rag_model_match: bool = Field(
        True,
        description="When the reader's answer is neither an exact match nor contains the target, ask the run's "
        "judge (the `judge:` section, an LLM semantic match) whether it is the target ([SSP]: exact match, "
        "then an LLM judge). No effect with judge kind 'none' (exact match only).",
    )
    force_final_question: bool = Field(
        True,
        description="On the proposer's last turn the environment writes the "
        "opening <question> tag (not trained on), so a proposer that ran out of "
        "turns still yields a question for the checks. On for the small CPU models: "
        "without it they mostly end in no_question failures, which all earn the same "
        "penalty and leave GRPO without signal. [SSP] does not force it (the proposer "
        "must close its question itself, and validity counts that): the GPU configs set false.",
    )


class JudgeConfig(
    Strict,
    endpoint_settings(
        "JudgeEndpointSettings",
        "For kind 'openai'",
        notes={"retries": "within timeout_s (kind 'model' uses the model's own `models:` settings)"},
        docs={
            "timeout_s": "The longest one judge call may take, retries included: a slower or failed call falls "
            "back to exact match and is counted as judge_unavailable."
        },
        timeout_s=30.0,
        connect_timeout_s=5.0,
        retries=2,
    ),
):
    """How answers are scored: normalized exact match first, then (optionally) an LLM semantic match."""

    kind: Literal["none", "model", "openai", "policy"] = Field(
        "none",
        description="'none': exact match only (the default; the paper's protocol adds an LLM judge on a miss). "
        "'model': the fixed model `endpoint` names in `models:`. 'openai': an endpoint given here (base_url, "
        "model). 'policy': the solver policy being trained -- warned, it grades itself.",
    )
    endpoint: str = Field("frozen", description="For kind 'model': a key of `models:`.")
    chat_template_kwargs: dict[str, Any] = chat_template_kwargs_field(
        "the judge's", " An unfinished judge reply counts as judge_unavailable, not as Wrong."
    )
    fallback: str | None = Field(
        None,
        description="For kind 'model': 'exact' (exact match alone) or a key of `models:` that judges instead "
        "when `endpoint`'s model is a fetched one whose files are not on this machine; said loudly at start "
        "and recorded in roles.json. None: such a run stops with the fetch command.",
    )
    max_tokens: int = Field(16, ge=1, description="Token budget of one judge reply.")
    require_overlap: bool = Field(
        False,
        description="A miss that shares no word stem with any gold answer (scoring.shares_a_stem: the first four "
        "characters of a word, number words as digits) is Wrong without asking the model. Deviation from [SSP]'s "
        "'exact match, then an LLM judge on every miss': in the default run Qwen2.5-Coder-1.5B called 'French "
        "Impressionism' Correct for Renoir, 6 model-judged rewards of 6 wrong; on 239 hand-labelled real answers "
        "the rule loses 1 right answer of 81 and rules out 123 wrong ones of 158. On in configs/tiny-cpu.yaml (a "
        "small judge); off by default, as for a judge trusted with aliases that share nothing (PRC for China).",
    )
    base_url: str | None = Field(None, description="Endpoint for kind 'openai'.")
    model: str | None = Field(None, description="Model name at the endpoint for kind 'openai'.")
    api_key_env: str | None = Field(
        None,
        description="Environment variable with the judge endpoint's API key; "
        "checked at start-up, an unset variable is an error.",
    )
    agreement_margin: float = Field(
        0.5,
        ge=0,
        le=1,
        description="`sesa train` warns once when the model's verdicts run this much more Correct than exact "
        "match's over the run so far: (Correct by the model / verdicts by the model) - (Correct by exact match / "
        "all the solver's verdicts), counted once the model gave agreement_min_verdicts. A sound judge only "
        "rescues paraphrases among the misses; an endpoint that answers Correct to everything trains a run "
        "toward noise without any error. 1 never warns.",
    )
    agreement_min_verdicts: int = Field(
        8, ge=1, description="The model verdicts the agreement_margin check waits for."
    )
    max_consecutive_failures: int = Field(
        20,
        ge=0,
        description="After this many LLM judgments in a row fail (endpoint down, error, timeout -- not replies "
        "without a verdict), the run stops with an error naming the judge instead of going on with exact "
        "match alone; 0 never stops.",
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, base_url: str | None) -> str | None:
        return base_url if base_url is None else check_http_url(base_url)

    @model_validator(mode="after")
    def _endpoint(self) -> JudgeConfig:
        if self.kind == "openai" and not (self.base_url and self.model):
            raise ValueError("judge kind 'openai' needs base_url and model")
        return self


class RewardConfig(Strict):
    """Rewards of both policies (see :mod:`sesa_graph.rewards`)."""

    proposer: Literal["frontier", "one_minus_p", "intermediate"] = Field(
        "frontier",
        description="Proposer reward over the solver group success rate p: 'frontier' ([paper] SESA's shaping), "
        "'one_minus_p' ([SSP]'s adversarial reward; the paper's 'w/o frontier shaping' row), 'intermediate' "
        "(ours: 1 for 0 < p < 1 else 0, not an SSP reward).",
    )
    frontier_lambda: float = Field(
        0.5,
        ge=0,
        description="Penalty for questions every rollout solved or none did (the paper leaves lambda open; "
        "0.5 is ours, see sesa_graph.rewards).",
    )
    format_penalty: float | None = Field(
        None,
        le=0,
        description="Proposer reward for an invalid question. Unset: -1 under 'frontier' and 'intermediate', "
        "[SSP]'s 0 under 'one_minus_p' (so the SSP-style arm and 'w/o frontier shaping' give SSP's reward "
        "whole). Deviation under frontier shaping: 0 would rank an invalid proposal above a trivial or "
        "impossible one (-lambda), so SESA's is -1; under 1-p no valid question scores below 0, so 0 ranks "
        "nothing wrongly.",
    )

    @model_validator(mode="after")
    def _penalty_by_reward(self) -> RewardConfig:
        if self.format_penalty is None:
            self.format_penalty = 0.0 if self.proposer == "one_minus_p" else -1.0
        return self


class RunConfig(Strict):
    """Everything one run needs. Sub-sections mirror the layers."""

    name: str = Field("tiny-cpu", description="Run name; outputs go to runs/<name>/.")
    seed: int = Field(
        0,
        ge=0,
        le=2**32 - 1,
        description="Seed for target sampling and generation (numpy's range: 0 to 2**32-1).",
    )
    solver_policy: PolicyConfig = Field(default_factory=PolicyConfig, description="The solver policy.")
    proposer_policy: PolicyConfig = Field(default_factory=PolicyConfig, description="The proposer policy.")
    search: SearchConfig = Field(
        default_factory=SearchConfig, description="The search tool both policies use."
    )
    solver: SolverConfig = Field(default_factory=SolverConfig, description="Solver loop.")
    proposer: ProposerConfig = Field(
        default_factory=ProposerConfig, description="Proposer loop and validation."
    )
    judge: JudgeConfig = Field(default_factory=JudgeConfig, description="Answer scoring.")
    rewards: RewardConfig = Field(default_factory=RewardConfig, description="Rewards.")
    memory: MemoryConfig = Field(
        default_factory=MemoryConfig, description="Skill memory (the solver's bank)."
    )
    train: TrainConfig = Field(default_factory=TrainConfig, description="Self-play training.")
    cluster: ClusterConfig = Field(
        default_factory=ClusterConfig,
        description="Where the orchestrator and the trainer jobs run, and how they reach each other.",
    )
    models: dict[str, EndpointConfig] = Field(
        default_factory=default_models,
        description="Fixed models -- never trained -- by name, for judge, distiller and proposer.rag_reader. "
        "The default 'frozen' is the format-warmed embedded model as it was before training (a documented "
        "deviation: the paper's distiller is a strong API model).",
    )
    distiller: ModelRef = Field(
        default_factory=ModelRef,
        description="The model that turns queued failures into skills (the paper: a fixed strong model).",
    )
    extra: dict[str, Any] = Field(
        default_factory=dict, description="Free-form notes stored with the run (never read by the code)."
    )

    @field_validator("name")
    @classmethod
    def _plain_name(cls, name: str) -> str:
        # the name becomes runs/<name>/: a separator, '..' or an absolute path would write elsewhere
        # a control character (a newline) would split log lines and listings; past ~100 characters the
        # run's deepest paths (checkpoints, shards) pass the file system's 255-byte name limit
        if (
            not name
            or name in (".", "..")
            or any(c in name for c in "/\\")
            or name != name.strip()
            or not name.isprintable()
            or len(name) > MAX_RUN_NAME
        ):
            raise ValueError(
                f"run name {name[:MAX_RUN_NAME]!r}{'...' if len(name) > MAX_RUN_NAME else ''} must be a plain "
                f"directory name: not empty, at most {MAX_RUN_NAME} characters, no '/', '\\' or control "
                "characters, not '.' or '..', no leading or trailing spaces (e.g. tiny-cpu-2)"
            )
        return name

    @model_validator(mode="after")
    def _groups(self) -> RunConfig:
        policies = {"solver": self.solver_policy, "proposer": self.proposer_policy}
        check_train_layout(self.train, self.cluster, policies, self.solver.group_size)
        if self.solver.group_size < 2:
            raise ValueError(
                f"solver.group_size is {self.solver.group_size}: GRPO needs at least 2 rollouts per "
                "question to compute advantages"
            )
        refs = [
            ("distiller.endpoint", self.distiller.endpoint),
            ("proposer.rag_reader.endpoint", self.proposer.rag_reader.endpoint),
        ]
        if self.distiller.fallback is not None:
            refs.append(("distiller.fallback", self.distiller.fallback))
        if self.judge.kind == "model":
            refs.append(("judge.endpoint", self.judge.endpoint))
            if self.judge.fallback not in (None, "exact"):
                refs.append(("judge.fallback", self.judge.fallback))
        for key, name in refs:
            if name != "policy" and name not in self.models:
                known = ", ".join(sorted(self.models)) or "none"
                raise ValueError(
                    f"{key} is {name!r}, which is not a key of models (defined: {known}) nor 'policy'"
                )
        for key, policy in (("solver_policy", self.solver_policy), ("proposer_policy", self.proposer_policy)):
            if policy.backend == "llama.cpp":
                raise ValueError(
                    f"{key}.backend 'llama.cpp' is for fixed models (models.NAME.serve): a trained policy needs "
                    "'vllm' (its weights are reloaded after each step) or 'local'"
                )
        reader = self.models.get(self.proposer.rag_reader.endpoint)
        if self.proposer.rag_check and reader is not None and reader.serves_chat_only:
            raise ValueError(
                f"proposer.rag_reader.endpoint {self.proposer.rag_reader.endpoint!r} is served by llama.cpp "
                "(chat only); the RAG reader needs token-id completions: name a 'local' or 'vllm' model"
            )
        if self.proposer.rag_check and reader is not None and reader.api == "chat":
            raise ValueError(
                f"proposer.rag_reader.endpoint {self.proposer.rag_reader.endpoint!r} has api 'chat'; the RAG "
                "reader needs 'completions' (it continues a token prefix)"
            )
        return self


def _load(path: Path, overrides: dict[str, Any], flags: dict[str, str]) -> tuple[RunConfig, dict[str, Any]]:
    """The validated config and what the file alone holds."""
    import copy

    in_file, lines = read_config_file(path)
    data = copy.deepcopy(in_file)
    apply_overrides(data, overrides, flags)
    try:
        return RunConfig.model_validate(data), in_file
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, path, lines, overrides, flags)) from None


def load_config(
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    flags: dict[str, str] | None = None,
) -> RunConfig:
    """Load a YAML run config (default ``configs/tiny-cpu.yaml``) with dotted-key overrides. A problem is a
    :class:`ConfigError` naming the file and line, or the flag (``flags``: the flag of an override key;
    default ``--set KEY=VALUE``) the bad value came from."""
    return _load(Path(path) if path else DEFAULT_CONFIG, overrides or {}, flags or {})[0]


Setting = tuple[str, Any, str]  # dotted key, resolved value, where it came from


def resolve_config(
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    flags: dict[str, str] | None = None,
) -> tuple[RunConfig, list[Setting]]:
    """:func:`load_config`, plus every resolved setting with its source: the command-line flag that set it
    (``flags`` names the flag of an override key; default ``--set KEY``), the file, or the schema default.
    `sesa train` prints these and `sesa config show --origins` too."""
    from sesa_graph.reference_values import flatten

    path = Path(path) if path else DEFAULT_CONFIG
    overrides, flags = overrides or {}, flags or {}
    cfg, data = _load(path, overrides, flags)
    in_file = flatten(data)

    def source(key: str) -> str:
        for k in overrides:
            if key == k or key.startswith(k + "."):
                return f"flag {flags.get(k, '--set ' + k)}"
        if key in in_file or any(k.startswith(key + ".") or key.startswith(k + ".") for k in in_file):
            return f"file {path}"
        return "default"

    return cfg, [(key, value, source(key)) for key, value in flatten(cfg.model_dump(mode="json")).items()]
