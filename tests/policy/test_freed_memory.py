"""keep_freed_memory / release_freed_memory: freed heap kept through an update, given back between updates."""

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

# In a child: the allocator settings are process-wide and would stay with the test process.
CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
import torch
from sesa_graph.policy.local import keep_freed_memory, release_freed_memory
from train_run import rss_kib

def rss_mib():
    return rss_kib() // 1024

keep_freed_memory()
base = rss_mib()
blocks = [torch.ones(512 * 1024) for _ in range(400)]  # 400 x 2 MiB, each below the raised mmap threshold
del blocks
held = rss_mib()
release_freed_memory()
print(base, held, rss_mib())
"""


def test_freed_blocks_stay_resident_until_released():
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(BENCHMARKS)], capture_output=True, text=True, check=True
    )
    base, held, released = map(int, out.stdout.split())
    assert held - base > 600, (base, held)  # kept: what keep_freed_memory is for (no munmap per tensor)
    assert held - released > 600, (held, released)  # given back by release_freed_memory
