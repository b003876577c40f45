"""LangGraph graphs wired from the rollout loop, judge and proposal checks in ``sesa_graph.rollout``: solve,
propose, selfplay, evaluate."""
