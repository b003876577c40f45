"""Stop-string cutting keeps text and token ids consistent (real SmolLM2 tokenizer, no model)."""

import pytest

from sesa_graph.policy.stops import cut_at_stop, first_stop


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    from sesa_graph.embedded import resolve_policy_model

    return AutoTokenizer.from_pretrained(resolve_policy_model("embedded"))


def test_first_stop_picks_the_earliest_ending():
    assert first_stop("a </search> b </answer>", ("</answer>", "</search>")) == (11, "</search>")
    assert first_stop("nothing here", ("</answer>",)) is None


@pytest.mark.parametrize(
    "text, stop",
    [
        ("<search>Eiffel Tower</search> and more words after", "</search>"),  # stop in the middle
        ("<answer>Paris</answer>", "</answer>"),  # stop at the very end
        ("x</answer>y</search>", "</answer>"),  # two stops: the first one wins
    ],
)
def test_cut_keeps_the_token_that_completes_the_stop(tok, text, stop):
    ids = tok(text, add_special_tokens=False)["input_ids"]
    keep, found = cut_at_stop(tok, ids, ("</search>", "</answer>"))
    assert found == stop
    cut = tok.decode(ids[:keep])
    assert cut.rstrip().endswith(stop) or stop in cut
    assert stop not in tok.decode(ids[: keep - 1])  # minimal: one token less loses the stop


def test_no_stop_keeps_everything(tok):
    ids = tok("plain text", add_special_tokens=False)["input_ids"]
    assert cut_at_stop(tok, ids, ("</answer>",)) == (len(ids), None)
    assert cut_at_stop(tok, [], ("</answer>",)) == (0, None)
