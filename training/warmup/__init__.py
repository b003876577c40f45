"""The SFT format warm-up (``sesa warmup``): the fine-tuning on synthetic, grounded rollouts (written by
``training.questions``) and on distiller examples.

- ``distiller_failures``: the failed rollouts the distiller examples are about, one draw per question type;
- ``distiller_data``: distiller examples (a failed rollout in, one JSON skill out);
- ``tokens``: tokens and masks of an example;
- ``sft``: ``run_warmup`` (TRL ``SFTTrainer``) and where the warmed copy lives;
The ``sesa warmup`` command is ``sesa_cli.warmup``.
"""
