"""Feed `sesa` the bad inputs and faults a careless user or a hostile file brings, and print one verdict each.

    .venv/bin/python benchmarks/bad_inputs.py [--only AREA,...] [--json out.json]

Every check runs the real command line (a fresh `sesa` process) on a file or server it prepares in a temp
directory. Verdicts:

- ``clear error``: non-zero exit, no traceback, and the message names what it must (file, line, key, flag, URL);
- ``handled``: the command did the right thing (checked by the check itself);
- ``no place``: an error without a traceback that does not name what it must;
- ``traceback``: a Python traceback for a user error or a fault;
- ``silently wrong``: exit 0 where an error was due, or a result the check finds wrong;
- ``lost data``: something already written is gone;
- ``unbounded``: still running after the check's time limit.

The checks' definitions live in ``bad_input_checks.py`` beside this file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(
    os.environ,
    HF_HUB_OFFLINE="1",
    TRANSFORMERS_OFFLINE="1",
    TOKENIZERS_PARALLELISM="false",
    ANONYMIZED_TELEMETRY="False",
    COLUMNS="200",
)


@dataclass
class Result:
    code: int | None
    out: str
    err: str
    seconds: float

    @property
    def text(self) -> str:
        return self.out + self.err


@dataclass
class Check:
    area: str
    what: str
    run: object  # (tmp: Path) -> Result | str (a verdict decided by the check itself)
    names: tuple[str, ...] = ()  # what the error message must name
    expect_error: bool = True
    limit_s: float = 180.0
    extra: dict = field(default_factory=dict)


def sesa(*args: str, cwd: Path | None = None, limit_s: float = 180.0, stdin: str | None = None) -> Result:
    t = time.monotonic()
    try:
        p = subprocess.run(
            [sys.executable, "-m", "sesa_cli.main", *args],
            check=False,
            cwd=cwd or ROOT,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=limit_s,
            input=stdin,
        )
    except subprocess.TimeoutExpired as exc:
        return Result(None, str(exc.stdout or ""), str(exc.stderr or ""), time.monotonic() - t)
    return Result(p.returncode, p.stdout, p.stderr, time.monotonic() - t)


def verdict(check: Check, res: Result | str) -> str:
    if isinstance(res, str):  # the check decided: "VERDICT: note"
        return res.split(":", 1)[0]
    if res.code is None:
        return "unbounded"
    if "Traceback (most recent call last)" in res.text:
        return "traceback"
    if not check.expect_error:
        return "handled" if res.code == 0 else "silently wrong"
    if res.code == 0:
        return "silently wrong"
    missing = [n for n in check.names if n.lower() not in res.err.lower()]
    return "no place" if missing else "clear error"


def message(res: Result | str) -> str:
    if isinstance(res, str):
        return res.split(":", 1)[-1].strip()[:160]
    for stream in (res.err, res.out):
        # click/typer draw usage errors in a box: keep the words, drop the frame
        lines = [x.strip(" │╭╰─╮╯") for x in stream.strip().splitlines()]
        lines = [x for x in lines if x and not x.startswith(("Usage:", "Try "))]
        if lines:
            hit = next((x for x in lines if "error" in x.lower() or "invalid" in x.lower()), lines[-1])
            return hit[:160]
    return ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="Comma-separated areas to run (default: all).")
    ap.add_argument("--json", type=Path, default=None, help="Also write the results here.")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from bad_input_checks import CHECKS

    areas = {a for a in args.only.split(",") if a}
    rows = []
    print("| area | input or fault | verdict | exit | s | message |")
    print("|---|---|---|---|---|---|")
    for check in CHECKS:
        if areas and check.area not in areas:
            continue
        with tempfile.TemporaryDirectory(prefix="sesa-bad-") as tmp:
            try:
                res = check.run(Path(tmp))  # type: ignore[operator]
            except Exception as exc:  # noqa: BLE001 -- a check that cannot even be set up is reported, not fatal
                res = f"check failed: {type(exc).__name__}: {exc}"
        v = verdict(check, res)
        code = "" if isinstance(res, str) else res.code
        secs = "" if isinstance(res, str) else f"{res.seconds:.1f}"
        msg = message(res).replace("|", "\\|")
        rows.append(
            {"area": check.area, "what": check.what, "verdict": v, "exit": code, "s": secs, "msg": msg}
        )
        print(f"| {check.area} | {check.what} | {v} | {code} | {secs} | {msg} |", flush=True)
    counts = Counter(r["verdict"] for r in rows)
    print("\n" + ", ".join(f"{k}: {n}" for k, n in counts.most_common()) + f" (of {len(rows)})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
