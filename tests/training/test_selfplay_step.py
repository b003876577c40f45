"""The self-play step that ``training.step`` owns writes what the orchestrator wrote before it did: the same
metrics lines, Parquet shards and failure records over a step refilled with bootstrap questions and
resampled, one resampled with earlier questions and one refilled with them; bootstrap draws are unchanged."""

import json

from tests.training.selfplay_step_fixture import FIXTURE, record


def test_a_seeded_run_writes_what_the_code_before_training_step_wrote():
    want = json.loads(FIXTURE.read_text())
    got = json.loads(json.dumps(record(), sort_keys=True))
    for i, (w, g) in enumerate(zip(want["steps"], got["steps"], strict=True)):
        assert g["metrics"] == w["metrics"], f"step {i}"
        assert g["shards"] == w["shards"], f"step {i}"
        assert g["failures"] == w["failures"], f"step {i}"
    assert got["bootstrap_synth"] == want["bootstrap_synth"]
    assert got["bootstrap_cloze"] == want["bootstrap_cloze"]


def test_one_synthesizer_reseeded_draws_as_a_new_one_and_names_its_questions():
    from sesa_graph.config import RunConfig
    from tools.backends import make_backend
    from training.questions.synth import Synthesizer
    from training.step import BOOTSTRAP_MIX

    search = make_backend(RunConfig().search)
    reused = Synthesizer(search, seed=1)
    reused.generate(6, BOOTSTRAP_MIX)
    for seed in (7, 3007):
        fresh = Synthesizer(search, seed=seed).generate(6, BOOTSTRAP_MIX)
        reused.reseed(seed)
        again = reused.generate(6, BOOTSTRAP_MIX)
        assert [e.messages for e in again] == [e.messages for e in fresh]
        # the field holds what the rendered prompt asks, byte for byte
        assert [e.question for e in again] == [
            e.messages[-1]["content"].rsplit("Question:", 1)[-1].strip() for e in fresh
        ]
