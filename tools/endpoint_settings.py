"""How a client calls a network endpoint -- per-attempt read and connect timeouts, retries, the pause before
a retry and the deadline of a whole call -- declared once for every config section that configures one
(the policies, ``models:`` endpoints, the judge's endpoint, the search server).

A section inherits the settings its client has from :func:`endpoint_settings`, with its own defaults and
the scope its field docs open with; the field names, bounds and docs come from :data:`SETTINGS`. Not every
client has every setting (the search client has no deadline, the judge's ``timeout_s`` bounds its whole
call), so a section names only the ones its client reads: a setting in a config is always one that acts.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, create_model

from tools.config_model import ConfigModel

# name -> (type, bounds, doc; {scope} is the section's endpoint, {note} what it adds)
SETTINGS: dict[str, tuple[type, dict[str, Any], str]] = {
    "timeout_s": (float, {"gt": 0}, "{scope}: how long one request attempt waits for its reply{note}."),
    "connect_timeout_s": (float, {"gt": 0}, "{scope}: how long one attempt waits to connect.{note}"),
    "retries": (
        int,
        {"ge": 0},
        "{scope}: retries of a request that could not connect, timed out or got HTTP 5xx/429, {note}.",
    ),
    "backoff_s": (float, {"ge": 0}, "Pause before the first retry, doubled{note} before each next one."),
    "deadline_s": (
        float,
        {"gt": 0},
        (
            "{scope}: the longest one request may take, all attempts and pauses together -- a server that "
            "accepts and never answers fails after this, with an error naming its URL.{note}"
        ),
    ),
}


class EndpointSettings(ConfigModel):
    """The base of every section's endpoint settings (made by :func:`endpoint_settings`)."""


def endpoint_settings(
    name: str,
    scope: str,
    notes: dict[str, str] | None = None,
    docs: dict[str, str] | None = None,
    **defaults: Any,
) -> type[EndpointSettings]:
    """A settings model with the settings named in ``defaults`` (and those defaults): each field's doc is
    :data:`SETTINGS`'s with ``scope`` and the section's ``notes`` filled in, or the section's own in
    ``docs`` where its client reads the setting differently."""
    unknown = set(defaults) - set(SETTINGS)
    if unknown:
        raise TypeError(f"not an endpoint setting: {sorted(unknown)}; the settings are {sorted(SETTINGS)}")
    fields: dict[str, Any] = {}
    for key, (kind, bounds, text) in SETTINGS.items():
        if key in defaults:
            doc = (docs or {}).get(key) or text.format(scope=scope, note=(notes or {}).get(key, ""))
            fields[key] = (kind, Field(defaults[key], description=doc, **bounds))
    return create_model(name, __base__=EndpointSettings, __module__=__name__, **fields)
