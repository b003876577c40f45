import pytest


@pytest.fixture(scope="session")
def local_policy():
    """The real embedded SmolLM2-135M-Instruct (converted once to $SESA_HOME)."""
    from sesa_graph.policy.local import LocalPolicy

    return LocalPolicy("embedded", batch_wait_ms=20)
