"""Which solver groups make the trainer's fixed-size batch for a step (moved out of the orchestrator)."""

from __future__ import annotations

from sesa_graph.trajectory import Trajectory


def groups_of(solver: list[Trajectory]) -> dict[str, list[Trajectory]]:
    groups: dict[str, list[Trajectory]] = {}
    for t in solver:
        groups.setdefault(t.group_id, []).append(t)
    return groups


def has_variance(group: list[Trajectory]) -> bool:
    # over all rewards, as GRPO's group mean is: a search_error member's reward counts though its loss is masked
    return len({t.reward for t in group}) > 1


def variance_groups(solver: list[Trajectory], group_size: int) -> int:
    return sum(1 for g in groups_of(solver).values() if len(g) == group_size and has_variance(g))


def select_groups(
    solver: list[Trajectory], questions: int, group_size: int, prefer_variance: bool = False
) -> list[Trajectory]:
    """Mark the first ``questions`` complete groups as the trainer's batch -- with ``prefer_variance`` those
    whose rewards differ first -- fresh before reused; keep the rest."""

    def rank(g: list[Trajectory]) -> tuple[bool, bool, bool]:
        return len(g) != group_size, prefer_variance and not has_variance(g), g[0].reused

    out = []
    for i, g in enumerate(sorted(groups_of(solver).values(), key=rank)):
        for t in sorted(g, key=lambda t: t.sample):
            t.selected = i < questions and len(g) == group_size
            out.append(t)
    return out
