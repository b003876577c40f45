from langchain_core.tools import BaseTool

from tools.bm25 import BM25Backend
from tools.langchain_tool import make_search_tool
from tools.render import render_docs


def test_search_tool(small_docs):
    backend = BM25Backend(small_docs)
    tool = make_search_tool(backend, k=2)
    assert isinstance(tool, BaseTool) and tool.name == "search"
    assert "query" in tool.args
    out = tool.invoke({"query": "iron tower in Paris"})
    assert out == render_docs(backend.search(["iron tower in Paris"], k=2)[0])
    assert out.startswith("Doc 1 (Title: Eiffel Tower) ")
