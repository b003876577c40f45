"""LangGraph graphs wired from the nodes in ``sesa_graph.nodes``: solve, propose, selfplay, evaluate."""
