"""Loosely typed input -> a request field's type: what a form, a JSON line, a flag or a link sends.

Numbers arrive as floats from the page and as text from a link or a flag; whole numbers stay exact
(a 19-digit seed is never read through a float); anything that cannot be the field's type is refused
with a sentence that names the field. One function per field type (``BY_TYPE``, keyed by the
annotation the schema writes).
"""

from __future__ import annotations

import math
import numbers
from decimal import Decimal, InvalidOperation
from typing import Any

from playground.errors import InvalidRequest


def prompt_text(value: Any) -> str:
    if value is None:
        raise InvalidRequest("the prompt is missing")
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidRequest(f"the prompt is not valid UTF-8 (bad byte at position {e.start})") from None
    if not isinstance(value, str):
        raise InvalidRequest(f"the prompt must be text, got {type(value).__name__}")
    return value


def _truth(value: bool) -> str:
    """A yes/no value as JSON writes it: requests come as JSON (the API, batch lines), not Python."""
    return "true" if value else "false"


def _int(name: str, value: Any) -> int:
    """Whole numbers stay exact: text is parsed as a decimal, never through a float (which would
    turn the seed 9007199254740993 into ...992 without a word). A float is accepted only when it
    holds a whole number exactly (UI number boxes send 4.0 for 4)."""
    if isinstance(value, bool):
        raise InvalidRequest(f"{name} must be a whole number, not a yes/no value ({_truth(value)})")
    if isinstance(value, str):
        try:
            number = Decimal(value.strip().replace("_", ""))
        except InvalidOperation:
            raise InvalidRequest(f"{name} must be a whole number, got {value!r}") from None
        if number.is_finite() and number.adjusted() >= 40:  # int() of 1e999999999 would not end
            raise InvalidRequest(f"{name} must be a whole number of at most 40 digits, got {value!r}")
        if number.is_finite() and number == number.to_integral_value():
            return int(number)
        raise InvalidRequest(f"{name} must be a whole number, got {value!r}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
        return int(value)
    raise InvalidRequest(f"{name} must be a whole number, got {value!r}")


def _optional_int(name: str, value: Any) -> int | None:
    """Blank text, or "none"/"off" for logprobs, is no value (the page's box, a batch line)."""
    if isinstance(value, str) and value.strip().lower() in ("", "none", "off"):
        return None
    return _int(name, value)


def _float(name: str, value: Any) -> float:
    if isinstance(value, bool):
        raise InvalidRequest(f"{name} must be a number, not a yes/no value ({_truth(value)})")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidRequest(f"{name} must be a number, got {value!r}") from None
    except OverflowError:  # an int past what a float holds (10**400)
        number = math.inf
    if not math.isfinite(number):
        raise InvalidRequest(f"{name} must be a finite number, got {value!r}")
    return number


def _choice(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be text, got {value!r}")
    value = value.strip()
    return value.upper() if name == "output_kind" else value.lower()


def _token_ids(name: str, value: Any) -> list[int] | None:
    """A list of whole numbers, or text of them separated by commas or spaces (a flag, a box)."""
    if isinstance(value, str):  # one text: said as given, not as the list it was split into
        if not all(part.lstrip("-").isdigit() for part in value.replace(",", " ").split()):
            raise InvalidRequest(f"{name} must be token ids (whole numbers) in a list, or separated by commas or "
                                 f"spaces, got {value!r}")
        value = value.replace(",", " ").split()
    if not isinstance(value, (list, tuple)):
        raise InvalidRequest(f"{name} must be a list of token ids (whole numbers), got {value!r}")
    return [_int(f"{name}[{position}]", v) for position, v in enumerate(value)] or None


def _stop(name: str, value: Any) -> list[str]:
    if value == "":
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(s, str) for s in value):
        return list(value)
    raise InvalidRequest(f"stop must be a string or a list of strings, got {value!r}")


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise InvalidRequest(f"{name} must be true or false, got {value!r}")


BY_TYPE = {"int": _int, "int | None": _optional_int, "float": _float, "str": _choice, "list[str]": _stop,
           "bool": _bool, "bool | None": _bool, "list[int] | None": _token_ids}
