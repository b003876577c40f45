"""One declaration of the endpoint settings: every client section takes them from tools.endpoint_settings."""

import pytest
from pydantic import ValidationError

from sesa_graph.config import JudgeConfig
from sesa_graph.model_config import EndpointConfig, PolicyConfig
from tools.config import SearchConfig
from tools.endpoint_settings import SETTINGS, EndpointSettings, endpoint_settings

SECTIONS = (PolicyConfig, EndpointConfig, JudgeConfig, SearchConfig)


@pytest.mark.parametrize("section", SECTIONS, ids=lambda c: c.__name__)
def test_every_client_section_takes_its_settings_from_the_one_declaration(section):
    assert issubclass(section, EndpointSettings)
    declared = [k for k in SETTINGS if k in section.model_fields]
    assert {"timeout_s", "connect_timeout_s", "retries"} <= set(declared)
    for key in declared:
        kind = SETTINGS[key][0]
        field = section.model_fields[key]
        assert field.annotation is kind and field.description
        with pytest.raises(ValidationError):  # the shared bound: no negative timeout or retry count
            section.model_validate({key: -1 if kind is int else -1.0, **_required(section)})


def _required(section):
    return {"base_url": "http://127.0.0.1:1/v1", "model": "m"} if section is EndpointConfig else {}


def test_each_section_keeps_its_own_defaults_and_only_the_settings_its_client_reads():
    assert (PolicyConfig().retries, EndpointConfig(**_required(EndpointConfig)).retries) == (4, 2)
    assert (JudgeConfig().timeout_s, SearchConfig().timeout_s, SearchConfig().connect_timeout_s) == (
        30.0,
        10.0,
        3.0,
    )
    assert "deadline_s" not in SearchConfig.model_fields and "backoff_s" not in JudgeConfig.model_fields
    with pytest.raises(ValidationError, match="deadline_s"):
        SearchConfig(deadline_s=5.0)


def test_a_section_gets_its_scope_and_notes_in_the_docs():
    made = endpoint_settings(
        "X", "For thing 'y'", notes={"retries": "within deadline_s"}, retries=1, deadline_s=2.0
    )
    assert set(made.model_fields) == {"retries", "deadline_s"} and made().retries == 1
    assert made.model_fields["retries"].description.startswith("For thing 'y': retries of a request")
    assert made.model_fields["retries"].description.endswith("within deadline_s.")
    with pytest.raises(TypeError, match="not an endpoint setting: \\['retry'\\]"):
        endpoint_settings("X", "y", retry=1)
