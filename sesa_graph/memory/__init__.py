"""Skill memory: the Chroma-backed skill bank and its lifecycle (retrieve, credit, queue, distil, evict).

The self-play step uses :class:`SkillMemory` (see :mod:`sesa_graph.memory.memory` for the per-step
calls); :class:`SkillBank` is the store; ``sesa bank`` (:mod:`sesa_cli.bank`) inspects banks.
"""

from sesa_graph.memory.bank import SkillBank
from sesa_graph.memory.bank_layout import (
    BankCorruptError,
    BankError,
    BankExistsError,
    BankNotFoundError,
)
from sesa_graph.memory.bank_lock import BankLockedError
from sesa_graph.memory.config import MemoryConfig
from sesa_graph.memory.consolidation import ConsolidationResult, Consolidator, distill_pass
from sesa_graph.memory.distiller import DistillerError
from sesa_graph.memory.memory import CommitReport, SkillMemory, StepReport
from sesa_graph.memory.queue import FailureQueue, FailureRecord
from sesa_graph.memory.skill import Skill, load_seeds, load_skill_file, write_skill_file
from sesa_graph.memory.utility import Outcome

__all__ = [
    "BankCorruptError",
    "BankError",
    "BankExistsError",
    "BankLockedError",
    "BankNotFoundError",
    "CommitReport",
    "ConsolidationResult",
    "Consolidator",
    "DistillerError",
    "FailureQueue",
    "FailureRecord",
    "MemoryConfig",
    "Outcome",
    "Skill",
    "SkillBank",
    "SkillMemory",
    "StepReport",
    "distill_pass",
    "load_seeds",
    "load_skill_file",
    "write_skill_file",
]
