"""The skill record, skill files (seeds, priming) and how a skill is embedded and shown to the solver.

A skill file is YAML::

    version: 1                 # bump when the skills change; recorded in the bank state
    source: seed               # seed | mined (default for every skill in the file)
    skills:
      - id: seed-bridge-entity
        category: decomposition
        description: ...
        trigger: ...           # when the skill applies (what kind of question)
        avoid: ...             # the mistake it prevents
        queries: ["...", ...]  # <= 3 query templates, placeholders in [brackets]

Seed skills are permanent (never evicted); mined and distilled ones are not.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sesa_graph.config_yaml import ConfigError, read_yaml_file
from sesa_graph.fsutil import write_yaml_atomic
from sesa_graph.prompts import SkillText, render_skills
from tools.errors import UserError

SEEDS_FILE = Path(__file__).with_name("seeds.yaml")
MAX_QUERIES = 3
SkillSourceKind = Literal["seed", "mined", "distilled"]

CATEGORIES = (
    "decomposition",
    "disambiguation",
    "comparison",
    "temporal",
    "numeric",
    "entity_resolution",
    "query_formulation",
    "verification",
    "aggregation",
    "answer_format",
    "other",
)


MAX_SKILL_FILE_BYTES = 16 * 2**20  # a full bank (800 skills of at most a few hundred characters) is < 1 MiB


class SkillFileError(UserError, ValueError):
    """A skill YAML file that cannot be used; the message names the file and the entry."""


class SkillReplay(BaseModel):
    """A candidate skill's source failure solved again with the skill in the prompt (memory.replay)."""

    question: str = Field(description="The failed question.")
    before: str | None = Field(None, description="The failed rollout's final answer.")
    answer: str | None = Field(
        None, description="The replay's final answer (greedy, this skill alone shown)."
    )
    correct: bool = Field(description="The run's judge's verdict on the replay's answer.")
    status: str = Field(description="How the replay rollout ended (answered, max_turns, search_error, ...).")


class Skill(BaseModel):
    """One reusable piece of search advice with its utility counters.

    ``retrieved`` counts judged rollouts that had the skill in their prompt and were not malformed;
    ``helpful`` those that answered correctly, ``hurt`` those that gave a wrong answer. ``score`` is
    helpful - hurt, the quantity eviction looks at.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, description="Stable id: the seed's name, 'm-<hash>' or 'd<step>-<hash>'.")
    description: str = Field(min_length=1, description="The advice itself, in one or two sentences.")
    trigger: str = Field(min_length=1, description="When it applies: the kind of question or situation.")
    avoid: str = Field("", description="The mistake it prevents (avoidance cue).")
    queries: list[str] = Field(
        default_factory=list, description="<= 3 query templates, placeholders in [brackets]."
    )
    category: str = Field("other", description="One of CATEGORIES (anything else is stored as 'other').")
    retrieved: int = Field(0, ge=0, description="Judged, well-formed rollouts that had it in their prompt.")
    helpful: int = Field(0, ge=0, description="Of those, answered correctly.")
    hurt: int = Field(
        0, ge=0, description="Of those, answered wrongly (an answer was given and it is wrong)."
    )
    seed: bool = Field(False, description="Seed skills are permanent.")
    created_step: int = Field(0, ge=0, description="Self-play step at which it entered the bank (0: start).")
    source: SkillSourceKind = Field("distilled", description="seed | mined | distilled.")
    source_failures: list[str] = Field(
        default_factory=list, description="Keys of the failures it was mined or distilled from."
    )
    replay: SkillReplay | None = Field(
        None,
        description="The replay check's evidence (memory.replay): its source failure solved again, greedily, "
        "with this skill alone in the solver's prompt, before it was admitted. None: not replayed.",
    )

    @field_validator("queries")
    @classmethod
    def _at_most_three(cls, v: list[str]) -> list[str]:
        v = [q.strip() for q in v if q and q.strip()]
        if len(v) > MAX_QUERIES:
            raise ValueError(f"at most {MAX_QUERIES} query templates, got {len(v)}")
        return v

    @field_validator("category")
    @classmethod
    def _known_category(cls, v: str) -> str:
        v = v.strip().lower().replace(" ", "_").replace("-", "_")
        return v if v in CATEGORIES else "other"

    @property
    def score(self) -> int:
        return self.helpful - self.hurt

    def embed_text(self) -> str:
        """What is embedded as the skill's document: when it applies, then what it says."""
        return f"{self.trigger} {self.description}"

    def text(self) -> str:
        """All of the skill's words (for length and entity checks)."""
        return " ".join([self.description, self.trigger, self.avoid, *self.queries])

    def prompt_text(self) -> SkillText:
        return SkillText(self.description, self.trigger, self.avoid, tuple(self.queries))


def content_id(prefix: str, *parts: str) -> str:
    """A short content hash id, e.g. ``content_id("m", description, trigger)`` -> ``m-1a2b3c4d5e``."""
    h = hashlib.sha1("\x1f".join(" ".join(p.lower().split()) for p in parts).encode()).hexdigest()[:10]
    return f"{prefix}-{h}"


def render_for_prompt(skills: Sequence[Skill], max_chars: int) -> str:
    """The solver-prompt block for retrieved skills: escaped and at most ``max_chars`` long ('' if none)."""
    return render_skills([s.prompt_text() for s in skills], max_chars=max_chars)


# ---- skill files ------------------------------------------------------------------------------------


def load_skill_file(path: str | Path) -> tuple[int, list[Skill]]:
    """Read a seeds/priming YAML file -> (its version, its skills). Errors name the file and the entry."""
    path = Path(path)
    try:  # read as a config is: a regular file, bounded, no alias bombs
        data, _ = read_yaml_file(path, "skill file", MAX_SKILL_FILE_BYTES)
    except ConfigError as exc:
        raise SkillFileError(str(exc)) from None
    if not isinstance(data, dict) or not isinstance(data.get("skills"), list):
        raise SkillFileError(f"{path}: expected a mapping with 'version' and a 'skills' list")
    version = data.get("version")
    if not isinstance(version, int):
        raise SkillFileError(f"{path}: 'version' must be an integer, got {version!r}")
    default_source = data.get("source", "mined")
    skills: list[Skill] = []
    seen: set[str] = set()
    for i, entry in enumerate(data["skills"]):
        if not isinstance(entry, dict):
            raise SkillFileError(f"{path}: skills[{i}] is not a mapping")
        entry = {"source": default_source, **entry}
        entry.setdefault("seed", entry["source"] == "seed")
        try:
            skill = Skill.model_validate(entry)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise SkillFileError(
                f"{path}: skills[{i}] ({entry.get('id', '?')}): {where}: {first['msg']}"
            ) from None
        if skill.id in seen:
            raise SkillFileError(f"{path}: skills[{i}]: duplicate id {skill.id!r}")
        seen.add(skill.id)
        skills.append(skill)
    return version, skills


FILE_FIELDS = ("id", "category", "description", "trigger", "avoid", "queries", "source_failures")


def skill_file_data(
    skills: Iterable[Skill], version: int = 1, source: str = "mined", note: str | None = None
) -> dict:
    """The YAML document of a priming/seed file (counters are left out: a file starts a bank fresh)."""
    entries = []
    for s in skills:
        d = s.model_dump(include=set(FILE_FIELDS))
        if not d["source_failures"]:
            d.pop("source_failures")
        entries.append({k: d[k] for k in FILE_FIELDS if k in d})
    data: dict = {"version": version, "source": source}
    if note:
        data["note"] = note
    data["skills"] = entries
    return data


def write_skill_file(
    path: str | Path,
    skills: Iterable[Skill],
    version: int = 1,
    source: str = "mined",
    note: str | None = None,
) -> Path:
    """Write skills as a priming/seed YAML file that ``load_skill_file`` reads back."""
    return write_yaml_atomic(Path(path), skill_file_data(skills, version, source, note))


def load_seeds(path: str | Path | None = None) -> tuple[int, list[Skill]]:
    """The permanent seed skills (default: the shipped seeds.yaml); every one is marked seed."""
    version, skills = load_skill_file(path or SEEDS_FILE)
    return version, [s.model_copy(update={"seed": True, "source": "seed"}) for s in skills]
