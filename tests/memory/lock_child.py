"""Child process for the two-writer test: opens a bank as its writer and credits a skill on command.

    python lock_child.py BANK_DIR

Reads commands from stdin, one per line: 'credit N' (N helpful outcomes for seed-dates-exact, one
apply_outcomes call each), 'close'. Prints 'ready' after opening and 'ok' after each command, or
'error: ...' when the open fails.
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from hash_encoder import HashEncoder

from sesa_graph.memory import BankError, MemoryConfig, SkillBank


def main() -> None:
    try:
        bank = SkillBank.open(Path(sys.argv[1]), MemoryConfig(), HashEncoder())
    except BankError as exc:
        print(f"error: {exc}", flush=True)
        return
    print("ready", flush=True)
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "credit":
            for _ in range(int(arg)):
                bank.apply_outcomes([(["seed-dates-exact"], True, "answered")])
        elif cmd == "close":
            bank.close()
        print("ok", flush=True)


if __name__ == "__main__":
    main()
