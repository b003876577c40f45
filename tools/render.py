"""Render retrieved docs as the text a policy reads inside ``<information>`` (see docs/PROTOCOL.md).

No escaping happens here; the protocol layer escapes whatever it inserts.
"""

from __future__ import annotations

from tools.corpus import Doc

NO_RESULTS = "No results found."


def render_docs(docs: list[Doc]) -> str:
    """``Doc 1 (Title: Eiffel Tower) The Eiffel Tower is ...``, one block per doc, joined by newlines.

    >>> render_docs([Doc("1", "Eiffel Tower", "A lattice tower."), Doc("2", "Paris", "Capital of France.")])
    'Doc 1 (Title: Eiffel Tower) A lattice tower.\\nDoc 2 (Title: Paris) Capital of France.'

    No docs (an empty query, or nothing matched) renders as ``NO_RESULTS`` so the reader sees why.
    """
    if not docs:
        return NO_RESULTS
    return "\n".join(f"Doc {i} (Title: {d.title}) {d.text}" for i, d in enumerate(docs, start=1))
