"""The one base of every settings model a user fills from a file, a flag or a form: values are taken as
written, never converted.

Pydantic's lax mode reads ``max_turns: "4"`` as 4, ``true`` as 1, ``"yes"`` or 1 as true and ``.inf`` as a
temperature, so a typo or a quoting slip runs silently with a value nobody wrote. :class:`ConfigModel`
validates in strict mode instead (a quoted number is text, a bool is not a number, an int is not a bool),
refuses NaN and infinities, and refuses integers beyond 64 bits (they overflow the libraries a value goes
to). Paths stay writable as plain strings (:data:`PathValue`); ``Literal`` choices are strings already.

:func:`updated` is the validated ``model_copy(update=...)`` for values a user gave (pydantic's skips
validation), and :func:`error_text` one readable phrase per validation error, for every place that reports
them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import pydantic
from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from tools.errors import UserError

INT_LIMIT = 2**63 - 1  # the largest value a C int64 (numpy, torch, the OS) holds
_INT_FIELDS = (int, int | None, Optional[int])  # noqa: UP045 -- pydantic keeps either spelling

# a path field read from YAML or a flag is a string: converted (the one conversion strict mode keeps)
PathValue = Annotated[Path, pydantic.Strict(False)]


def _too_large(value: Any, at: str = "") -> str | None:
    """Where in ``value`` (a key path) an integer beyond 64 bits sits, with it, or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) > INT_LIMIT:
            digits = len(str(abs(value)))
            return f"{at + ': ' if at else ''}{'-' if value < 0 else ''}{digits}-digit integer"
        return None
    if isinstance(value, Mapping):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _too_large(item, f"{at}.{key}" if at else str(key))
        if found:
            return found
    return None


class ConfigModel(BaseModel):
    """Settings base: unknown keys are errors, values are validated strictly (no string-to-number,
    number-to-bool or bool-to-number conversion), floats must be finite and integers fit 64 bits."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _fits_64_bits(cls, value: Any, info: ValidationInfo) -> Any:
        found = _too_large(value)
        if found:
            raise ValueError(f"integer out of range ({found}; at most {INT_LIMIT})")
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, float) and value.is_integer() and field and field.annotation in _INT_FIELDS:
            return int(value)  # 4.0 is exactly 4 (a number, not text: no conversion guesses anything)
        return value


def _input(value: Any) -> str:
    if value is None:
        return "no value (null)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:40] + "..."
        return f"the string {shown!r}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} (.inf and .nan are not allowed)"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    return f"a {type(value).__name__}"


def error_text(err: Mapping[str, Any]) -> str:
    """One validation error's message, saying what was given when a value had the wrong type (the user
    sees ``"4"`` is not ``4``)."""
    kind, given = err["type"], err.get("input")
    msg = str(err["msg"]).removeprefix("Value error, ")
    if kind in ("int_type", "float_type") and isinstance(given, bool):
        return f"expected a number, got the boolean {str(given).lower()}"
    if kind in ("int_type", "float_type", "int_from_float") and isinstance(given, str):
        return f"{msg}, got {_input(given)} (a quoted value is text: write numbers without quotes)"
    if kind == "bool_type":
        return f"{msg}, got {_input(given)} (write true or false)"
    if kind == "finite_number":
        return f"{msg}, got {_input(given)}"
    if kind in ("int_type", "float_type", "string_type", "list_type", "dict_type", "model_type"):
        return f"{msg}, got {_input(given)}"
    return msg


M = TypeVar("M", bound=BaseModel)


def updated(model: M, changes: Mapping[str, Any], flags: Mapping[str, str] | None = None) -> M:
    """``model`` with the top-level fields ``changes`` names set, validated as a config file's values are
    (``model_copy(update=...)`` would take any value). A bad value is a :class:`UserError` naming the flag
    it came from (``flags``: field -> flag; default ``--field-name``)."""
    data = {**model.model_dump(exclude_unset=True), **changes}
    try:
        return type(model).model_validate(data)
    except ValidationError as exc:
        flags = flags or {}
        parts = []
        for err in exc.errors():
            key = str(err["loc"][0]) if err["loc"] else ""
            flag = flags.get(key) or (f"--{key.replace('_', '-')}" if key in changes else key or "settings")
            shown = f"{flag} {changes[key]}" if key in changes and flag.startswith("--") else flag
            parts.append(f"{shown}: {error_text(err)}")
        raise UserError("; ".join(parts)) from None


def check_http_url(url: str) -> str:
    """``url`` when it is an http:// or https:// URL with a host; else a ValueError saying so (every
    endpoint setting is one: another scheme fails only after minutes of retries)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
    except ValueError:
        parts = None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// or https:// URL (e.g. http://127.0.0.1:8000/v1)")
    return url
