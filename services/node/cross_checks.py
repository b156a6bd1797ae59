"""Where two sources of a service's settings disagree: the running command line against the unit file, vLLM's
start-up log and ``/v1/models``."""

from __future__ import annotations

import json

from services.models import FlagValue, VllmCommand
from services.node.api_facts import ApiFacts
from services.parse import vllm_args
from services.redact import REDACTED, Redactor, is_secret_name


def drift(running: VllmCommand, declared: VllmCommand, redactor: Redactor) -> list[str]:
    """What differs between the running command and the one the unit declares (a restart applies it)."""
    diffs: list[str] = []
    if running.model != declared.model:
        diffs.append(f"model {running.model} → {declared.model}")
    for key in list(dict.fromkeys([*running.flags, *declared.flags])):
        a, b = running.flags.get(key), declared.flags.get(key)
        if a != b:
            if is_secret_name(key):
                diffs.append(f"--{key} differs ({REDACTED})")
            else:
                before, after = vllm_args.format_flag_value(a), vllm_args.format_flag_value(b)
                diffs.append(f"--{key} {redactor.text(before)} → {redactor.text(after)}")
    return diffs


_HUMAN_INT = {"k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4, "K": 1024, "M": 1024**2, "G": 1024**3,
              "T": 1024**4}  # fmt: skip


def comparable(value: FlagValue) -> object:
    """A flag's value as vLLM reads it, for comparing: ``32k`` and ``32000`` alike, JSON by its object."""
    if isinstance(value, bool):
        return value
    if isinstance(value, list):
        return [comparable(v) for v in value]
    text = value.strip()
    if text[-1:] in _HUMAN_INT and text[:-1].replace(".", "", 1).isdigit():
        return float(text[:-1]) * _HUMAN_INT[text[-1]]
    try:
        parsed: object = json.loads(text)
    except ValueError:
        return text
    if isinstance(parsed, int | float) and not isinstance(parsed, bool):
        return float(parsed)
    return parsed


def against_log(running: VllmCommand, logged: VllmCommand, pid: int) -> list[str]:
    """Where vLLM's own start-up log disagrees with the command line read from the process."""
    diffs: list[str] = []
    if running.model and logged.model and running.model != logged.model:
        diffs.append(f"model {running.model} (command line) vs {logged.model} (log)")
    for key, lv in logged.flags.items():
        rv = running.flags.get(key)
        if rv is None or "." in key or comparable(rv) == comparable(lv):
            continue
        if is_secret_name(key):
            diffs.append(f"--{key} differs ({REDACTED})")
        else:
            fmt = vllm_args.format_flag_value
            diffs.append(f"--{key} {fmt(rv)} (command line) vs {fmt(lv)} (log)")
    if not diffs:
        return []
    return [f"vLLM's start-up log (`non-default args`) disagrees with the command line of PID {pid}: "
            + "; ".join(diffs)]


def against_api(running: VllmCommand, api: ApiFacts) -> list[str]:
    """Where ``/v1/models`` disagrees with the command line (a resolved value, e.g. an auto-fit length)."""
    out: list[str] = []
    if api.root and running.model and running.model != api.root and running.model not in api.ids:
        out.append(f"/v1/models says the server loaded {api.root}, but the settings name {running.model}")
    flag = running.flags.get("max-model-len")
    if api.max_model_len is not None and isinstance(flag, str):
        asked = comparable(flag)
        if isinstance(asked, float) and asked > 0 and int(asked) != api.max_model_len:
            out.append(f"/v1/models reports max_model_len {api.max_model_len}, but the settings say "
                       f"--max-model-len {flag}: vLLM resolved another value than the one passed")
    return out
