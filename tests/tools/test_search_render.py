from tools.corpus import Doc
from tools.render import NO_RESULTS, render_docs


def test_render_docs():
    docs = [
        Doc("a", "Eiffel Tower", "A lattice tower in Paris."),
        Doc("b", "Paris", "<b>Capital</b> of France."),
    ]
    assert render_docs(docs) == (
        "Doc 1 (Title: Eiffel Tower) A lattice tower in Paris.\nDoc 2 (Title: Paris) <b>Capital</b> of France."
    )  # no escaping here: the protocol layer escapes


def test_render_no_docs():
    assert render_docs([]) == NO_RESULTS
