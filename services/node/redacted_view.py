"""How a service's settings are shown without their secrets: flags, command lines, launchers."""

from __future__ import annotations

import json

from services.models import FlagValue
from services.redact import REDACTED, Redactor, is_secret_name, redact_value


def redact_flags(flags: dict[str, FlagValue], redactor: Redactor) -> dict[str, FlagValue]:
    """Every flag value with its secrets (by the flag's name, or a known value in it) replaced."""
    out: dict[str, FlagValue] = {}
    for k, v in flags.items():
        if isinstance(v, bool):
            out[k] = v
        elif isinstance(v, list):
            out[k] = [REDACTED if is_secret_name(k) else redactor.text(redact_value(k, x)) for x in v]
        else:
            out[k] = redactor.text(redact_value(k, v))
    return out


def shown_flags(
    original: dict[str, FlagValue], redacted: dict[str, FlagValue]
) -> tuple[dict[str, FlagValue], list[str]]:
    """The flags to show: each value exactly as passed unless redaction changed what it says.

    A JSON value whose redacted form parses to the same object as the original lost no secret: the
    original text is kept (key order, spacing), so the answer shows the value as the process received it.
    """
    shown: dict[str, FlagValue] = {}
    changed: list[str] = []
    for key, before in original.items():
        after = redacted.get(key, before)
        if isinstance(before, str) and isinstance(after, str) and after != before and _same_json(before, after):
            after = before
        shown[key] = after
        if after != before:
            changed.append(key)
    return shown, changed


def _same_json(a: str, b: str) -> bool:
    try:
        return bool(json.loads(a) == json.loads(b))
    except ValueError:
        return False


def redact_argv(argv: list[str]) -> list[str]:
    """A command line with the value of every secret-named ``--flag`` (``--flag=value`` or ``--flag value``)
    replaced."""
    out: list[str] = []
    secret_next = False
    for tok in argv:
        if secret_next and not tok.startswith("-"):
            out.append(REDACTED)
            continue
        secret_next = False
        name, eq, _value = tok.partition("=")
        if tok.startswith("--") and is_secret_name(name.lstrip("-")):
            if eq:
                out.append(f"{name}={REDACTED}")
            else:
                out.append(tok)
                secret_next = True
            continue
        out.append(tok)
    return out


def short(argv: list[str], limit: int = 90) -> str:
    """A command line in one line of at most ``limit`` characters, secret flags redacted."""
    text = " ".join(redact_argv(argv))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def launcher_text(words: list[str]) -> str:
    """``sudo -u vllm``, ``uv run --project /opt/app``: program paths shortened to their names."""
    shown = [w.rsplit("/", 1)[-1] if i == 0 or (w.startswith("/") and "/bin/" in w) else w
             for i, w in enumerate(redact_argv(words))]
    text = " ".join(shown)
    return text if len(text) <= 60 else text[:59] + "…"
