"""The SFT format warm-up (``sesa warmup``): synthetic, grounded rollouts and the fine-tuning on them.

- ``corpus``: the embedded corpus articles, with their Wikidata descriptions;
- ``facts``: what is parsed from an article (first clause, clue, nationality, creator, year, kind);
- ``examples``: the example record and the exact text of its turns and observations;
- ``kinds_solver`` / ``kinds_proposer``: one method per example kind (mixins of the synthesizer);
- ``synth``: the ``Synthesizer`` (pools, search grounding, the kind mix) and ``DEFAULT_MIX``;
- ``distiller_data``: distiller examples (a failed rollout in, one JSON skill out);
- ``tokens``: tokens and masks of an example;
- ``sft``: ``run_warmup`` (TRL ``SFTTrainer``) and where the warmed copy lives;
- ``cli``: the ``sesa warmup`` command (the only module here that imports typer).
"""
