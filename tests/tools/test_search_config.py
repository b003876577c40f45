import pytest
from pydantic import ValidationError

from tools.backends import SearchBackend, make_backend
from tools.config import SearchConfig
from tools.http import HttpBackend


def test_defaults_and_docs():
    cfg = SearchConfig()
    assert (cfg.backend, cfg.corpus, cfg.k, cfg.dense_model) == ("bm25", "embedded", 3, "embedded")
    assert all(f.description for f in SearchConfig.model_fields.values())


@pytest.mark.parametrize(
    "bad",
    [
        {"backend": "elastic"},  # unknown backend
        {"k": 0},  # k must be >= 1
        {"retries": -1},
        {"topk": 3},  # unknown key (extra="forbid")
    ],
)
def test_rejects_bad_settings(bad):
    with pytest.raises(ValidationError):
        SearchConfig(**bad)


def test_make_backend_http():
    backend = make_backend(SearchConfig(backend="http", url="http://127.0.0.1:9/", retries=1))
    assert isinstance(backend, HttpBackend) and isinstance(backend, SearchBackend)
    assert backend.url == "http://127.0.0.1:9" and backend.retries == 1
