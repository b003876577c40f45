"""Feed `sesa` every bad input and fault of the bad-input suite and print a verdict for each, as a Markdown table
with the time each took:

    .venv/bin/python benchmarks/bad_inputs.py [--area AREA ...] [--name TEXT] [--json rows.jsonl]

The rows live in ``tests/hostile/rows_*.py`` (one module per area; ``tests/hostile/harness.py`` says what each
verdict means); CI runs the same rows in ``tests/hostile/test_hostile_inputs.py`` and needs every one to end
``clear`` or ``handled``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(key, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from tests.hostile.run import main

    sys.exit(main(["--markdown", *sys.argv[1:]]))
