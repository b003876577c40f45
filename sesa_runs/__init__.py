"""The read-only view of runs and evals: load what they write, trace one rollout, plot, report."""
