"""Facts parsed from an article: its first clause and a short clue."""

from __future__ import annotations

from sesa_graph.corpus.articles import Article
from sesa_graph.corpus.facts import clue, first_clause


def test_clause_and_clue_parsing():
    a = Article("Kuwait City", "Kuwait City is the capital and largest city of Kuwait.", "", "Geography")
    c = first_clause(a, 400)
    assert (c.verb, c.det, c.predicate) == ("is", "the", "capital and largest city of Kuwait")
    assert first_clause(Article("X", "Something else entirely is a thing.", ""), 400) is None  # other subject
    assert (
        clue("landlocked country in Central Europe, bordered by Germany")
        == "landlocked country in Central Europe"
    )
    assert clue("country in the") is None  # ends on a function word
    assert clue("one two three four five six seven eight nine ten eleven") is None  # too long
