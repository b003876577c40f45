"""Child process for the kill test: builds a memory, starts a consolidation, and parks at a chosen point.

    python crash_child.py BANK_DIR {distilling|committing} MARKER

'distilling': parks while the distiller is still working (nothing of the pass written yet).
'committing': parks inside the commit, after the journal was written and Chroma was changed (skills
added), but before the queue, snapshot and state files were rewritten -- the worst moment to die.
It touches MARKER when parked; the parent then SIGKILLs it.
"""

import os
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from fakes import ScriptedDistiller, by_index, failure

from sesa_graph.memory import MemoryConfig, SkillMemory


def park(marker: Path) -> None:
    marker.touch()
    while True:
        time.sleep(1)


def main() -> None:
    path, variant, marker = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    gate = threading.Event()
    mem = SkillMemory.create(path, MemoryConfig(), distiller=ScriptedDistiller(by_index, gate=gate))
    mem.add_failures([failure(i, skills=["seed-dates-exact"]) for i in range(25)])
    mem.apply_outcomes([(["seed-dates-exact"], False, "answered")] * 2)
    assert mem.maybe_consolidate(10)
    if variant == "distilling":
        park(marker)
    import sesa_graph.memory.bank_journal as bank_module

    real_write = bank_module.write_json_atomic

    def die_here(target, obj):  # the commit writes the journal, changes Chroma, then rewrites the queue
        if Path(target).name == "queue.json" and (path / "journal.json").exists():
            park(marker)
        return real_write(target, obj)

    bank_module.write_json_atomic = die_here
    gate.set()
    mem.commit(11, wait=True, timeout=120)
    raise SystemExit("the commit should have parked")


if __name__ == "__main__":
    main()
