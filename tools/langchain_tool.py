"""A search backend as a langchain-core tool, so any LangChain agent can search our corpus or server."""

from __future__ import annotations

from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from tools.backends import SearchBackend
from tools.render import render_docs


class SearchInput(BaseModel):
    query: str = Field(description="What to search for, e.g. 'iron lattice tower in Paris'.")


def make_search_tool(backend: SearchBackend, k: int = 3) -> StructuredTool:
    """A tool named ``search`` that returns the top-``k`` docs for a query, rendered by ``render_docs``."""

    def search(query: str) -> str:
        return render_docs(backend.search([query], k=k)[0])

    return StructuredTool.from_function(
        func=search,
        name="search",
        description=f"Search the document corpus ({backend.name}). Returns the top {k} passages, each "
        "as 'Doc i (Title: ...) text'.",
        args_schema=SearchInput,
    )
