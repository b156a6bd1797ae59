"""What vLLM's own API says (``/version``, ``/v1/models``) about the server it runs."""

from __future__ import annotations

import json
from dataclasses import dataclass

from services.models import HttpProbe
from services.node.probe import UnitRaw
from services.parse import vllm_log


@dataclass
class ApiFacts:
    """What vLLM's own API says about the settings."""

    answered: bool = False
    root: str | None = None
    ids: tuple[str, ...] = ()
    max_model_len: int | None = None
    models_status: int | None = None


def api_facts(raw: UnitRaw) -> ApiFacts:
    """Whether the API answered at all, and the model and ``max_model_len`` that ``/v1/models`` lists."""
    api = ApiFacts()
    for probe in (raw.health, raw.version, raw.models):
        if probe is not None and probe.status is not None:
            api.answered = True
    m = raw.models
    api.models_status = m.status if m is not None else None
    if m is None or m.status != 200:
        return api
    try:
        cards = json.loads(m.body).get("data") or []
    except (ValueError, AttributeError):
        return api
    base = [c for c in cards if isinstance(c, dict) and not c.get("parent")]
    if not base:
        return api
    first = base[0]
    api.root = str(first.get("root") or first.get("id") or "") or None
    api.ids = tuple(str(c.get("id")) for c in base if c.get("id"))
    mml = first.get("max_model_len")
    api.max_model_len = mml if isinstance(mml, int) and not isinstance(mml, bool) else None
    return api


def served_models(probe: HttpProbe) -> tuple[list[str] | None, str | None]:
    """Model ids and roots from ``/v1/models`` (asked with the bot's API key), or why there are none."""
    if probe.status == 401:
        return None, "/v1/models refused the API key the bot holds for this service (401): check api_key_env"
    if probe.status != 200:
        return None, f"/v1/models did not answer ({probe.error or probe.status})"
    try:
        cards = json.loads(probe.body).get("data") or []
    except (ValueError, AttributeError):
        return None, "/v1/models answered something that is not the OpenAI model list"
    names = [str(c.get(k)) for c in cards if isinstance(c, dict) for k in ("id", "root") if c.get(k)]
    return list(dict.fromkeys(names)), None


def version(raw: UnitRaw, journal: str) -> str | None:
    """vLLM's version: what /version said, else the journal's start-up banner."""
    found: str | None = None
    if raw.version is not None and raw.version.status == 200:
        try:
            v = json.loads(raw.version.body).get("version")
            found = str(v) if v else None
        except (ValueError, AttributeError):
            found = None
    if found is None and journal:
        found = vllm_log.parse_banner_version(journal)
    return found
