"""The judge: exact match first, LLM semantic match on a miss, counted fallback when the LLM fails."""

import asyncio

import pytest
from langchain_core.language_models import BaseChatModel, FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage

from sesa_graph.policy.base import GenerationRequest, GenerationResult, PolicyClient
from sesa_graph.prompts import JUDGE_EXAMPLES
from sesa_graph.rollout.judge import Judge, JudgeItem, Verdict, parse_judgment


class ScriptedPolicy:
    """A PolicyClient that replies with canned text, records its calls, and can fail or stall."""

    name = "scripted"
    tokenizer = None

    def __init__(self, replies=(), *, error=None, delay=0.0):
        self.replies = list(replies)
        self.error = error
        self.delay = delay
        self.calls: list[list[GenerationRequest]] = []

    async def generate(self, requests):
        self.calls.append(requests)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.error:
            raise self.error
        return [GenerationResult(self.replies.pop(0), [], [], [], "eos") for _ in requests]

    def encode_messages(self, messages):
        return []

    def encode_text(self, text):
        return []


def test_fake_is_a_policy_client():
    assert isinstance(ScriptedPolicy(), PolicyClient)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Correct", True),  # the asked-for reply
        ("correct.", True),  # case and punctuation
        (" **Correct**\n", True),  # markdown and whitespace
        ("The prediction is correct.", True),  # extra words
        ("<think>same person</think>Correct", True),  # a reasoning model's think block is skipped
        ("Wrong", False),  # the other asked-for reply
        ("WRONG!", False),  # case and punctuation
        ("Incorrect", False),  # synonym of Wrong, not a substring hit on "correct"
        ("not correct", False),  # negation
        ("This isn't entirely correct", False),  # negation with a word between
        ("reasoning about it</think>\nWrong", False),  # the template opened <think>: the verdict follows it
        ("reasoning, is it correct?</think>\nCorrect", True),
        # no verdict is not "Wrong": None, the exact-match miss stands as judge_unavailable
        ("Correct or Wrong", None),  # both: ambiguous
        ("Yes", None),  # neither
        ("", None),  # nothing
        (None, None),
        ("<think>is it correct? maybe", None),  # reasoning cut off before a verdict
        ("<think>fine</think><think>still thinking, correct", None),  # a second think block cut off
    ],
)
def test_parse_judgment(reply, expected):
    assert parse_judgment(reply) is expected


async def test_exact_match_skips_the_llm():
    policy = ScriptedPolicy()
    v = await Judge(policy).judge("Capital of France?", "the paris", ["Paris"])
    assert v == Verdict(correct=True, score=1.0, em=1.0, f1=1.0, method="exact")
    assert policy.calls == []


async def test_no_prediction_is_wrong_without_llm():
    policy = ScriptedPolicy()
    judge = Judge(policy)
    v = await judge.judge("Capital of France?", None, ["Paris"])
    assert (v.correct, v.score, v.method) == (False, 0.0, "none")
    assert policy.calls == [] and judge.llm_count == 0


async def test_em_only_judge():
    v = await Judge(None).judge("Capital of France?", "City of Paris", "Paris")
    assert (v.correct, v.method, v.em) == (False, "exact", 0.0)
    assert v.f1 == pytest.approx(0.5)  # precision 1/3 ("city of paris"), recall 1


async def test_policy_judge_batches_and_parses():
    policy = ScriptedPolicy(["Correct.", "wrong", "Wrong!"])
    judge = Judge(policy, max_tokens=8)
    verdicts = await judge.judge_many(
        [
            JudgeItem("Who composed Salome?", "R. Strauss", ["Richard Strauss"]),
            ("Capital of France?", "Paris", ["Paris"]),  # exact hit: not sent to the LLM
            ("Capital of Italy?", "Milan", ["Rome"]),
            ("Largest planet?", "Saturn", ["Jupiter"]),
        ]
    )
    assert [v.method for v in verdicts] == ["llm", "exact", "llm", "llm"]
    assert [v.correct for v in verdicts] == [True, True, False, False]
    assert [v.score for v in verdicts] == [1.0, 1.0, 0.0, 0.0]
    assert verdicts[0].raw == "Correct." and verdicts[0].em == 0.0 and verdicts[0].f1 == pytest.approx(0.5)
    # one generate call for all misses, greedy, few tokens, the judge prompt filled in
    assert len(policy.calls) == 1 and len(policy.calls[0]) == 3
    req = policy.calls[0][0]
    assert req.sampling.temperature == 0.0 and req.sampling.max_tokens == 8
    roles = [m["role"] for m in req.messages]  # an explicit system turn, the worked examples, the item
    assert roles == ["system", *["user", "assistant"] * len(JUDGE_EXAMPLES), "user"]
    content = req.messages[-1]["content"]
    assert "Who composed Salome?" in content and "Richard Strauss" in content and "R. Strauss" in content
    assert judge.llm_count == 3 and judge.unavailable_count == 0


async def test_a_repeated_item_is_asked_once():
    """A group often gives one wrong answer five times: the judge asks once and every copy gets the verdict."""
    policy = ScriptedPolicy(["Wrong", "Correct"])
    judge = Judge(policy)
    same = ("Capital of Italy?", "Milan", ["Rome"])
    verdicts = await judge.judge_many(
        [same, same, ("Who composed Salome?", "R. Strauss", ["Richard Strauss"]), same]
    )
    assert len(policy.calls[0]) == 2
    assert [v.correct for v in verdicts] == [False, False, True, False]
    assert judge.llm_count == 4  # judgments, not calls


async def test_reply_without_verdict_is_unavailable_not_wrong():
    """Correct / Wrong / no verdict: a reply that says neither, both, nothing, or is cut off inside <think>
    leaves the exact-match miss standing, counted as judge_unavailable (its reply kept for the log)."""
    replies = ["Correct", "Wrong", "Correct or Wrong", "", "<think>The gold is Rome and", "Hmm."]
    judge = Judge(ScriptedPolicy(replies))
    verdicts = await judge.judge_many([("q", f"guess {i}", ["Rome"]) for i in range(len(replies))])
    assert [v.method for v in verdicts] == ["llm", "llm"] + ["judge_unavailable"] * 4
    assert [v.correct for v in verdicts] == [True] + [False] * 5
    assert [v.score for v in verdicts] == [1.0] + [0.0] * 5
    assert verdicts[4].raw == "<think>The gold is Rome and"
    assert judge.llm_count == 6 and judge.unavailable_count == 4


class _TailTokenizer:
    """Decodes prompt ids 0/1 as an assistant header that does / does not open <think>."""

    def decode(self, ids):
        return "<|im_start|>assistant\n<think>\n" if ids[-1] == 1 else "<|im_start|>assistant\n"


class OpenThinkPolicy(ScriptedPolicy):
    """A policy whose chat template opens <think> in the prompt (prompt id 1), as Qwen3's does."""

    tokenizer = _TailTokenizer()

    def __init__(self, replies, opens):
        super().__init__(replies)
        self.opens = opens

    async def generate(self, requests):
        self.calls.append(requests)
        return [GenerationResult(self.replies.pop(0), [], [], [int(self.opens)], "length") for _ in requests]


async def test_reply_inside_a_template_opened_think_is_no_verdict():
    # the prompt ended in "<think>\n": "... is Correct" is reasoning cut off by max_tokens, not a verdict
    judge = Judge(OpenThinkPolicy(["the prediction is Correct, since"], opens=True))
    v = await judge.judge("q", "Milan", ["Rome"])
    assert v.method == "judge_unavailable" and v.raw == "<think>the prediction is Correct, since"
    judge = Judge(OpenThinkPolicy(["same city</think>\n\nCorrect"], opens=True))
    assert (await judge.judge("q", "Milan", ["Rome"])).method == "llm"
    judge = Judge(OpenThinkPolicy(["Correct"], opens=False))
    assert (await judge.judge("q", "Milan", ["Rome"])).correct


async def test_policy_judge_error_falls_back_and_is_counted():
    judge = Judge(ScriptedPolicy(error=RuntimeError("endpoint down")))
    verdicts = await judge.judge_many(
        [("q", "Milan", ["Rome"]), ("q", "Rome", ["Rome"]), ("q", "Paris", ["Lyon"])]
    )
    assert [v.method for v in verdicts] == ["judge_unavailable", "exact", "judge_unavailable"]
    assert [v.correct for v in verdicts] == [False, True, False]
    assert judge.unavailable_count == 2


async def test_policy_judge_timeout_falls_back():
    judge = Judge(ScriptedPolicy(["Correct"], delay=5.0), timeout_s=0.05)
    v = await judge.judge("q", "Milan", ["Rome"])
    assert v.method == "judge_unavailable" and not v.correct
    assert judge.unavailable_count == 1


async def test_chat_model_judge():
    judge = Judge(FakeListChatModel(responses=["Correct", "Wrong"]))
    verdicts = await judge.judge_many([("q1", "R. Strauss", ["Richard Strauss"]), ("q2", "Milan", ["Rome"])])
    assert sorted(v.correct for v in verdicts) == [False, True]  # the fake's order under concurrency
    assert all(v.method == "llm" for v in verdicts)


async def test_generic_chat_model_judge():
    judge = Judge(GenericFakeChatModel(messages=iter([AIMessage(content="Correct!")])))
    v = await judge.judge("Who composed Salome?", "R. Strauss", ["Richard Strauss"])
    assert (v.correct, v.method, v.raw) == (True, "llm", "Correct!")


class FailingChatModel(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "failing"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        raise ConnectionError("no route to judge")


async def test_chat_model_error_falls_back_and_is_counted():
    judge = Judge(FailingChatModel())
    verdicts = await judge.judge_many([("q", "Milan", ["Rome"]), ("q", "Rome", ["Rome"])])
    assert [v.method for v in verdicts] == ["judge_unavailable", "exact"]
    assert judge.unavailable_count == 1


def test_rejects_other_models():
    with pytest.raises(TypeError, match="PolicyClient"):
        Judge("gpt-4")  # type: ignore[arg-type]


class DuckChat:
    """Not a langchain model: anything with ainvoke is a chat judge (e.g. ChatEndpoint)."""

    def __init__(self, reply):
        self.reply, self.seen = reply, []

    async def ainvoke(self, messages):
        self.seen.append(messages)
        return AIMessage(content=self.reply)


async def test_any_ainvoke_model_judges():
    model = DuckChat("")
    judge = Judge(model)
    v = await judge.judge("q", "Milan", ["Rome"])
    assert v.method == "judge_unavailable" and judge.unavailable_count == 1  # an empty reply: no verdict
    assert model.seen[0][0].type == "system" and "Milan" in model.seen[0][-1].content
    assert [m.type for m in model.seen[0][1:3]] == ["human", "ai"]  # the worked examples as earlier turns


async def test_an_answer_that_echoes_the_question_is_wrong_without_a_call():
    """Real solver answers of the labelled set that only repeat the question are Wrong by rule; one sharing a
    word with a gold still goes to the model."""
    policy = ScriptedPolicy(["Correct"])
    judge = Judge(policy)
    q = "what is the common name for gravitational force?"
    verdicts = await judge.judge_many(
        [
            (q, "gravitational force", ["Gravity", "Gravity, or gravitation"]),
            ("Who was older, John Adams or Thomas Jefferson?", "Jefferson", ["Thomas Jefferson"]),
        ]
    )
    assert [(v.method, v.correct) for v in verdicts] == [("echo", False), ("llm", True)]
    assert len(policy.calls[0]) == 1 and judge.llm_count == 1
    assert (await Judge(None).judge(q, "gravitational force", ["Gravity"])).method == "exact"  # no model: EM


async def test_a_template_word_or_a_copied_question_is_never_correct_whatever_the_model_says():
    """The default run's judge called the literal "answer" (copied from the prompt's <answer>answer</answer>)
    Correct 7 times in 7: a placeholder, a no-answer and the question given back are Wrong by rule, the
    model is not asked; a gold that is itself such a word still matches exactly."""
    policy = ScriptedPolicy(["Correct", "Correct"])
    judge = Judge(policy)
    q = "Name the island that is the largest island in Canada and the fifth-largest in the world."
    verdicts = await judge.judge_many(
        [
            ("Which vegetable came from the Andes?", "answer", ["Potato"]),
            ("Which vegetable came from the Andes?", "The answer.", ["Potato"]),
            ("Which vegetable came from the Andes?", "your question", ["Potato"]),
            ("Who painted it?", "Unknown", ["Renoir"]),
            ("Were Demosthenes and Pablo Picasso of the same nationality?", "Greek statesman", ["no"]),
            ("Which planet is it?", "A", ["Earth"]),
            ("How many times wider is it?", "4", ["FOUR (4)"]),
            (q, q, ["Baffin Island"]),
            (q, "the largest island in Canada and the fifth-largest in the world", ["Baffin Island"]),
            (
                "Which came first, University of Oxford or University of Cambridge?",
                "University of Oxford",
                ["Oxford"],
            ),
            ("What word ends every quiz reply?", "answer", ["Answer"]),
        ]
    )
    assert [(v.method, v.correct) for v in verdicts] == [
        ("non_answer", False),
        ("non_answer", False),
        ("non_answer", False),
        ("non_answer", False),
        ("non_answer", False),
        ("non_answer", False),
        ("llm", True),  # a single digit is a number: the model decides
        ("echo", False),
        ("echo", False),
        ("llm", True),  # a choice taken from the question is an answer: the model decides
        ("exact", True),
    ]
    assert len(policy.calls) == 1 and judge.llm_count == 2


def test_the_placeholders_are_read_from_the_prompts():
    from sesa_graph.prompts import template_placeholders

    assert {"answer", "the answer", "query", "your question", "a short query"} <= template_placeholders()


async def test_a_miss_sharing_no_word_stem_with_the_gold_is_wrong_unasked_when_required():
    """The default run's 1.5B judge called 'French Impressionism' Correct for Renoir; judge.require_overlap
    (on in the default config) rules such misses out, while an alias sharing a stem still reaches the model."""
    from sesa_graph.config import load_config

    assert load_config(None).judge.require_overlap
    policy = ScriptedPolicy(["Correct", "Correct", "Correct"])
    judge = Judge(policy, require_overlap=True)
    verdicts = await judge.judge_many(
        [
            ("Who was a French Impressionist artist?", "French Impressionism", ["Pierre-Auguste Renoir"]),
            ("Which nationality did Abdoulaye Wade have?", "Senegal", ["Senegalese"]),
            ("How many wins did he have?", "eleven", ["11"]),
            ("Which film is it?", "Ant Man", ["Ant-Man"]),
        ]
    )
    assert [v.method for v in verdicts] == ["no_overlap", "llm", "llm", "llm"]
    assert [v.correct for v in verdicts] == [False, True, True, True]
    assert (
        await Judge(ScriptedPolicy(["Correct"])).judge("q", "PRC", ["China"])
    ).method == "llm"  # off: asked
