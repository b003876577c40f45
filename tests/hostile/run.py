"""Run the bad-input suite: ``python -m tests.hostile.run [--area A] [--json OUT] [--markdown]``.

Every row runs in this one process, under a memory cap (``--mem-gib``, RLIMIT_AS) and its own time limit
(SIGALRM), in a fresh directory that is also the working directory and holds ``SESA_HOME``. Exit code 0 when
every row is ``clear`` or ``handled``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import resource
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

from tests.hostile.harness import GOOD, SHARED, Outcome, Row, RowTimeout, chdir

HERE = Path(__file__).parent


def load_rows(areas: list[str] | None = None) -> list[Row]:
    rows: list[Row] = []
    for path in sorted(HERE.glob("rows_*.py")):
        mod = importlib.import_module(f"tests.hostile.{path.stem}")
        rows += [r for r in mod.ROWS if not areas or r.area in areas]
    names = [(r.area, r.name) for r in rows]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f"row names must be unique per area: {sorted(dup)}"
    return rows


def _alarm(signum, frame):
    raise RowTimeout("past the row's time limit")


def run_row(row: Row, root: Path) -> tuple[Outcome, float]:
    tmp = Path(tempfile.mkdtemp(prefix="row-", dir=root))
    old_home = os.environ.get("SESA_HOME")
    os.environ["SESA_HOME"] = str(tmp / ".sesa-home")
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, row.timeout_s)
    start = time.monotonic()
    try:
        with chdir(tmp):
            out = row.run(tmp)
    except RowTimeout:
        out = Outcome("unbounded", f"still running after {row.timeout_s:g} s")
    except MemoryError:
        out = Outcome("unbounded", "ran out of the suite's memory cap")
    except Exception as exc:  # noqa: BLE001 -- the row's own machinery failed: counted as a traceback, never hidden
        out = Outcome("traceback", f"row raised {traceback.format_exception_only(exc)[-1].strip()[:200]}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        # a command may leave a logging handler on the row's captured (now closed) stream, as `sesa eval` does
        logging.root.handlers.clear()
        if old_home is None:
            os.environ.pop("SESA_HOME", None)
        else:
            os.environ["SESA_HOME"] = old_home
    secs = time.monotonic() - start
    if secs >= row.timeout_s and out.verdict != "unbounded":  # the command caught the timeout and reported it
        out = Outcome(
            "unbounded", f"ran {secs:.0f} s, past its {row.timeout_s:g} s ({out.verdict}: {out.detail})"
        )
    return out, secs


def markdown(results: list[dict]) -> str:
    lines = ["| area | input | verdict | s | detail |", "|---|---|---|---:|---|"]
    for r in results:
        detail = r["detail"].replace("|", "\\|").replace("\n", " ")[:140]
        lines.append(f"| {r['area']} | {r['name']} | {r['verdict']} | {r['seconds']:.2f} | {detail} |")
    counts: dict[str, int] = {}
    for r in results:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    lines.append("")
    lines.append(f"{len(results)} rows: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--area", action="append", help="only rows of this area (repeatable)")
    ap.add_argument("--name", help="only rows whose name holds this text")
    ap.add_argument("--json", type=Path, help="write one JSON object per row here")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--mem-gib", type=float, default=8.0, help="address-space cap for the whole suite")
    args = ap.parse_args(argv)
    cap = int(args.mem_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    rows = [r for r in load_rows(args.area) if not args.name or args.name in r.name]
    results = []
    sink = args.json.open("w") if args.json else None
    with tempfile.TemporaryDirectory(prefix="hostile-") as root, SHARED.stack:
        for row in rows:
            if sink:
                sink.write(json.dumps({"area": row.area, "name": row.name, "started": True}) + "\n")
                sink.flush()
            out, secs = run_row(row, Path(root))
            res = {
                "area": row.area,
                "name": row.name,
                "verdict": out.verdict,
                "seconds": secs,
                "detail": out.detail,
            }
            results.append(res)
            if sink:  # row by row, so a suite that dies shows the row it died in
                sink.write(json.dumps(res) + "\n")
                sink.flush()
            line = f"{out.verdict:9} {secs:6.2f}s  {row.area}: {row.name}  {out.detail[:120]}"
            print(line, file=sys.stderr if args.markdown else sys.stdout, flush=True)
    if sink:
        sink.close()
    if args.markdown:
        print(markdown(results))
    bad = [r for r in results if r["verdict"] not in GOOD]
    print(f"{len(results)} rows, {len(bad)} not clear or handled", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
