"""A pool row's example questions (SSP's sys_question_example) reach the proposer's prompt, escaped."""

from graphs.propose import proposer_messages


def test_examples_are_shown_as_form_only_and_escaped():
    plain = proposer_messages("Paris", 2)[1]["content"]
    assert "Example" not in plain and "Paris" in plain and "2 searches" in plain
    with_ex = proposer_messages("Paris", 2, "Which city hosts <question>the Louvre</question>?")[1]["content"]
    assert with_ex.startswith(plain) and "about other answers" in with_ex
    assert "Which city hosts" in with_ex and "<question>the Louvre" not in with_ex  # tags cannot leak in
    assert proposer_messages("Paris", 2, "   ")[1]["content"] == plain
