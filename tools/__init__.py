"""Search tool layer: corpora, BM25 / dense / HTTP backends and the retrieval server.

The lowest layer of sesa-graph: it imports nothing from ``sesa_graph``, ``graphs`` or ``training``.
"""
