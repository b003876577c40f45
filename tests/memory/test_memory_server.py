"""Server mode: the bank's collections live in a `chroma run` server, reached over HttpClient."""

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from sesa_graph.memory import BankExistsError, MemoryConfig, SkillBank
from tools.ports import free_port

CHROMA = shutil.which("chroma") or str(Path(__import__("sys").executable).with_name("chroma"))


@pytest.fixture
def chroma_server(tmp_path):
    if not Path(CHROMA).exists():
        pytest.skip("the chroma CLI is not installed")
    port = free_port()
    proc = subprocess.Popen(
        [CHROMA, "run", "--path", str(tmp_path / "server"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("chroma run did not start")
            time.sleep(0.2)
    yield port
    proc.terminate()
    proc.wait(10)


def test_bank_in_a_chroma_server(chroma_server, tmp_path, encoder):
    cfg = MemoryConfig(chroma_host="127.0.0.1", chroma_port=chroma_server, collection="run_a")
    bank = SkillBank.create(tmp_path / "state", cfg, encoder)
    assert not (tmp_path / "state" / "chroma").exists()  # the vectors live in the server
    assert (
        bank.retrieve(["What is the capital of the country where the bridge is?"])[0][0].id
        == "seed-location-chain"
    )
    bank.apply_outcomes([(["seed-location-chain"], True, "answered")])
    bank.close()
    again = SkillBank.open(tmp_path / "state", cfg, encoder)
    assert again.get("seed-location-chain").helpful == 1 and len(again) == 15
    again.close()
    with pytest.raises(BankExistsError, match="run_a"):  # a second run must not reuse the collection
        SkillBank.create(tmp_path / "other", cfg, encoder)
