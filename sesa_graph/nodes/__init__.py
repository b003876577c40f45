"""The agent's nodes, one file each: proposer, solver, judge, distiller."""
