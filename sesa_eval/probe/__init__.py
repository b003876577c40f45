"""The probe set: held-out, corpus-grounded questions (1-3 hops) for a sensitive laptop-scale eval.

``facts`` reads the held-out articles and the facts the questions ask for; ``generate`` builds the
questions and writes the frozen file (``python -m sesa_eval.probe.generate``). docs/PROBE.md describes
the split, the forms and which of them overlap the warm-up's templates.
"""

GENERATOR = "probe-v1"
GENERATOR_V2 = "probe-v2"
