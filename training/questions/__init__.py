"""Grounded questions synthesized from the embedded corpus, as whole rollouts in the graphs' exact token
format; read by the format warm-up (``training.warmup``) and by the self-play bootstrap
(``training.step``).

- ``examples``: the example record and the exact text of its turns and observations;
- ``kinds_solver`` / ``kinds_proposer``: one method per example kind (mixins of the synthesizer);
- ``synth``: the ``Synthesizer`` (pools, search grounding, the kind mix), ``DEFAULT_MIX`` and ``allocate``.
"""
