"""The live progress of ``sesa eval``: a rich bar per dataset with running judge scores per mode."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from sesa_eval.datasets import display_name


class EvalProgress:
    """A rich progress bar per dataset (done / total, elapsed, ETA) with running judge scores per mode."""

    def __init__(self, console: Console, enabled: bool = True) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("[bold]{task.description:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[scores]}"),
            console=console,
            disable=not enabled,
            transient=False,
        )
        self.tasks: dict[str, Any] = {}
        self.sums: dict[tuple[str, str], list[float]] = {}
        self.modes: list[str] = []

    def start(
        self,
        data: dict,
        modes: list[str],
        n_seeds: int,
        cached: dict[str, int],
        store: Any,
        skipped: Any = None,
    ) -> None:
        """``skipped``: dataset -> questions one mode does not run (mode oracle without a document)."""
        self.modes = list(modes)
        ids = {(ds, q.id) for ds, qs in data.items() for q in qs}
        for rec in store.latest.values():
            if (rec["dataset"], rec["id"]) in ids and rec["mode"] in modes and rec.get("status") != "error":
                self._add(rec)
        for ds, qs in data.items():
            self.tasks[ds] = self.progress.add_task(
                escape(display_name(ds)),  # a file's name: never rich markup
                total=(len(qs) * len(modes) - (skipped or {}).get(ds, 0)) * n_seeds,
                completed=cached.get(ds, 0),
                scores=self._scores(ds),
            )
        self.progress.start()

    def _add(self, rec: dict) -> None:
        s = self.sums.setdefault((rec["dataset"], rec["mode"]), [0.0, 0])
        s[0] += float(rec.get("score") or 0.0)
        s[1] += 1

    def _scores(self, ds: str) -> str:
        parts = []
        for m in self.modes:
            s = self.sums.get((ds, m))
            parts.append(f"{m} {100 * s[0] / s[1]:.1f}" if s and s[1] else f"{m} –")
        return "  ".join(parts)

    def update(self, rec: dict) -> None:
        if rec.get("status") != "error":
            self._add(rec)
        self.progress.update(self.tasks[rec["dataset"]], advance=1, scores=self._scores(rec["dataset"]))

    def stop(self) -> None:
        self.progress.stop()
