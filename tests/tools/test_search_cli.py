import json
import socket

import typer
from typer.testing import CliRunner

from sesa_cli.search import search_app

parent = typer.Typer()
parent.add_typer(search_app, name="search")  # mounted as the lead's `sesa search`


@parent.command()
def other() -> None:  # a second command so `search` stays a named subcommand
    pass


runner = CliRunner()


def corpus_file(tmp_path, small_docs):
    path = tmp_path / "c.jsonl"
    rows = [json.dumps({"id": d.id, "contents": f'"{d.title}"\n{d.text}'}) for d in small_docs]
    path.write_text("\n".join(rows))
    return str(path)


def test_query_is_the_default_command(tmp_path, small_docs):
    corpus = corpus_file(tmp_path, small_docs)
    res = runner.invoke(parent, ["search", "iron tower in Paris", "-k", "1", "--corpus", corpus])
    assert res.exit_code == 0, res.output
    assert "1. Eiffel Tower" in res.output and "\n2. " not in res.output
    # options before the query, and the explicit long form
    res = runner.invoke(parent, ["search", "--corpus", corpus, "-k", "1", "mountain"])
    assert res.exit_code == 0 and "Mount Everest" in res.output
    res = runner.invoke(parent, ["search", "query", "mountain", "--corpus", corpus])
    assert res.exit_code == 0 and "Mount Everest" in res.output


def test_serve_subcommand(small_docs):
    res = runner.invoke(parent, ["search", "serve", "--help"])
    assert res.exit_code == 0 and "--port" in res.output
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = runner.invoke(parent, ["search", "serve", "--port", str(port)])
    assert res.exit_code == 2 and f"port {port}" in res.output  # a taken port is a user error (exit 2)


def test_bad_settings_and_dead_server():
    res = runner.invoke(parent, ["search", "x", "--backend", "nope"])
    assert res.exit_code == 2
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = runner.invoke(
        parent, ["search", "x", "-b", "http", "--url", f"http://127.0.0.1:{port}", "--retries", "0"]
    )
    assert res.exit_code == 1 and f"127.0.0.1:{port}/retrieve" in res.output
