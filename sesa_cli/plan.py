"""`sesa plan`: the memory plan of a run config, per GPU (training.memory_plan), and whether it fits."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from tools.terminal import ID_CHARS, shown


def plan_command(
    config: Path | None = typer.Option(
        None, "--config", "-c", help="YAML run config (default configs/tiny-cpu.yaml)."
    ),
    gpu_gib: float | None = typer.Option(
        None,
        "--gpu-gib",
        min=1,
        help="Memory of each GPU in GiB (default: train.gpu_memory_gib, else the first visible GPU's).",
    ),
    set_: list[str] = typer.Option(
        [], "--set", help="Override a field as `sesa train --set` would: --set train.micro_batch_size=1."
    ),
) -> None:
    """Print what each process of the run needs on each GPU and exit 0 if every GPU fits, else 2 naming the
    GPU and the shortfall (what `sesa train` checks at start-up).

    Trainer ranks: master weights, gradients and optimizer state (divided by the ranks under train.sharding
    fsdp2), the compute copy, TRL's reference model (train.beta > 0), one micro-batch's activations and the
    fused LM head, and a fixed CUDA overhead. vLLM servers: their gpu_memory_utilization share of the GPU
    (weights, profile pass, CUDA graphs, and the KV cache in what is left, in tokens) plus their CUDA context.
    With cluster.trainers external, one table per node: the orchestrator's servers, then each trainer node's
    ranks (train.trainer_gpus on every trainer node; FSDP2 shards over a job's ranks on all of them).
    Estimates from the models' shapes and the config, not measurements. A CPU config has no GPU plan: its
    host lines are a rough estimate and never refused.
    """
    from sesa_cli.common import parse_overrides
    from sesa_graph.config import DEFAULT_CONFIG, load_config
    from training.memory_plan import check_memory_plan, plan

    path = config or DEFAULT_CONFIG
    cfg = load_config(path, parse_overrides(set_))
    mp = plan(cfg, gpu_gib)
    console = Console() if Console().is_terminal else Console(width=170)
    for renderable in render(mp, f"{cfg.name} ({path})"):
        console.print(renderable)
    check_memory_plan(cfg, gpu_gib)  # raises the one-line error (exit 2) when the plan does not fit


def render(mp, title: str) -> list:
    """The plan as rich renderables: one table (GiB) per node with a total row per device, each distinct
    process's assumptions, then the notes. One machine: one table, titled as before nodes existed."""
    from rich.text import Text

    out: list = []
    for node in mp.nodes:
        where = ""
        if node == "orchestrator":
            where = ", orchestrator node (`sesa train`)"
        elif node:
            where = f", {node} (`sesa trainers --node-rank {node.rsplit(' ', 1)[1]}`)"
        out.append(table([d for d in mp.devices if d.node == node], f"memory plan of {title}{where}, GiB"))
    details: dict[tuple[str, str], str] = {}
    for d in mp.devices:
        for p in d.processes:
            # one line per kind of process: its ranks and replicas share their assumptions
            details.setdefault((p.name.split(" rank ")[0].split(" replica ")[0], p.detail), p.model)
    # model names and notes come from the config file: control characters shown, never sent raw
    out += [Text(shown(f"{name}: {detail}")) for (name, detail) in details if detail]
    out += [Text(shown(f"note: {n}")) for n in mp.notes]
    out += [Text(shown(f"cannot start: {n}"), style="red") for n in mp.problems]
    return out


def table(devices: list, title: str):
    """One node's devices: a row per process, a total row per device."""
    from rich.table import Table
    from rich.text import Text

    from training.memory_plan import PARTS

    t = Table(title=Text(shown(title, None, one_line=True)), title_justify="left")
    for col in ("device", "process", "model", *PARTS, "total"):
        t.add_column(col, justify="left" if col in ("device", "process", "model") else "right")
    for d in devices:
        for i, p in enumerate(d.processes):
            cells = [f"{p.parts[k]:.1f}" if k in p.parts else "" for k in PARTS]
            names = (
                Text(shown(x, ID_CHARS, one_line=True)) for x in ("" if i else d.device, p.name, p.model)
            )
            t.add_row(*names, *cells, f"{p.total:.1f}")
        room, cap = d.headroom or 0.0, d.capacity_gib or 0.0
        if d.device == "host" or not cap:
            verdict = "total (rough, never refused)"
        elif room >= 0:
            verdict = f"total of {cap:.1f}: headroom {room:.1f} ({room / cap:.0%})"
        else:
            verdict = f"total of {cap:.1f}: OVER by {-room:.1f}"
        style = "bold" if d.fits else "bold red"
        cells = [Text(d.device, style=style), Text(verdict, style=style), "", *[""] * len(PARTS)]
        t.add_row(*cells, Text(f"{d.total:.1f}", style=style), end_section=True)
    return t
