"""``sesa search``: query a backend from the shell, or serve one over HTTP.

    sesa search "iron lattice tower in Paris" -k 3 --backend bm25
    sesa search serve --backend bm25 --host 127.0.0.1 --port 8000
    sesa search "who built it" --backend http --url http://127.0.0.1:8000

A first argument that is not a subcommand is the query (``sesa search query "..."`` is the long form,
needed only for a query that is literally ``serve``).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from sesa_cli.common import ReportingGroup
from tools.backends import make_backend
from tools.config import SearchConfig
from tools.errors import ServiceError, UserError
from tools.terminal import ID_CHARS, shown


class _QueryByDefault(ReportingGroup):
    def parse_args(self, ctx, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["query", *args]
        return super().parse_args(ctx, args)


search_app = typer.Typer(
    cls=_QueryByDefault,
    no_args_is_help=True,
    help='Search the corpus (`sesa search "query"`) or serve a backend (`sesa search serve`).',
)
console = Console(
    highlight=False
)  # documents are data: never highlighted (slow on a long field), never markup

_D = SearchConfig.model_fields  # help texts come from the config's field descriptions
Backend = Annotated[str, typer.Option("--backend", "-b", help=_D["backend"].description)]
Corpus = Annotated[str, typer.Option(help=_D["corpus"].description)]
Url = Annotated[str, typer.Option(help=_D["url"].description)]
DenseModel = Annotated[str, typer.Option(help=_D["dense_model"].description)]
K = Annotated[int, typer.Option("-k", "--k", help=_D["k"].description)]
Host = Annotated[str, typer.Option(help="Interface to bind; 0.0.0.0 exposes the server to the network.")]
Retries = Annotated[int, typer.Option(help=_D["retries"].description)]


def _config(**kwargs) -> SearchConfig:
    from pydantic import ValidationError

    try:
        return SearchConfig(**kwargs)
    except ValidationError as e:  # each error names its setting, which is the flag of the same name
        raise UserError(
            "invalid search settings: "
            + "; ".join(f"--{'.'.join(map(str, x['loc'])).replace('_', '-')}: {x['msg']}" for x in e.errors())
        ) from None


def _backend(cfg: SearchConfig):
    """The backend, or a UserError naming the setting a bad corpus or model came from."""
    try:
        return make_backend(cfg)
    except (UserError, ServiceError):
        raise
    except (
        OSError,
        ValueError,
    ) as e:  # e.g. a --dense-model that is no model, a corpus file that is no JSONL
        raise UserError(
            f"search backend {cfg.backend} (--corpus {cfg.corpus}, --dense-model {cfg.dense_model}): "
            f"{' '.join(str(e).split())}"
        ) from None


@search_app.command()
def query(
    text: Annotated[str, typer.Argument(help="The search query.")],
    k: K = 3,
    backend: Backend = "bm25",
    corpus: Corpus = "embedded",
    url: Url = "http://127.0.0.1:8000",
    dense_model: DenseModel = "embedded",
    retries: Retries = 3,
) -> None:
    """Print the top-k documents for one query."""
    cfg = _config(backend=backend, corpus=corpus, k=k, url=url, dense_model=dense_model, retries=retries)
    docs = _backend(cfg).search([text], k=cfg.k)[0]
    if not docs:
        console.print("[yellow]no results[/]")
    for i, d in enumerate(docs, start=1):
        console.print(
            Text.assemble(
                (f"{i}. {shown(d.title, ID_CHARS, one_line=True)}", "bold cyan"),
                (f"  score {d.score:.3f}  id {shown(d.id, ID_CHARS, one_line=True)}", "dim"),
            ),
            soft_wrap=True,
        )
        console.print(Text(shown(d.text)), end="\n\n", soft_wrap=True)


@search_app.command()
def serve(
    host: Host = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    k: K = 3,
    backend: Backend = "bm25",
    corpus: Corpus = "embedded",
    url: Url = "http://127.0.0.1:8000",
    dense_model: DenseModel = "embedded",
) -> None:
    """Serve a backend with the Search-R1 `/retrieve` API (and `GET /status`)."""
    from tools.server import bind_socket
    from tools.server import serve as serve_backend

    if not 1 <= port <= 65535:
        raise UserError(f"--port {port}: a TCP port is 1 to 65535; give a free port, e.g. --port 8000")
    cfg = _config(backend=backend, corpus=corpus, k=k, url=url, dense_model=dense_model)
    try:
        sock = bind_socket(host, port)  # fail on a taken port before spending time on the index
    except OSError as e:  # (a taken port is a PortInUseError, a UserError, reported as it is)
        if isinstance(e, UserError):
            raise
        raise UserError(f"--host {host} --port {port}: {e.strerror or e}") from None
    console.print(f"[bold]search config[/] {escape(cfg.model_dump_json())}", soft_wrap=True)
    search = _backend(cfg)
    console.print(
        f"serving {search.name} on http://{host}:{port}  (POST /retrieve, GET /status)", markup=False
    )
    serve_backend(search, default_k=cfg.k, sock=sock)
