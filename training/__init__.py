"""Training: the format warm-up (``sesa warmup``), the TRL trainers of both policies, the trajectory store
and the self-play orchestrator."""
