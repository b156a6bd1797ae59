"""services/node/api_facts.py: what the recorded Kimi server's API said (/version 0.20.1, /v1/models 401 without
the key), and OpenAI model lists as vLLM serves them."""

from __future__ import annotations

from services.models import HttpProbe
from services.node.api_facts import api_facts, served_models, version
from tests.unit.services.node.recorded import unit

READY = unit("settings-ready")
# vLLM's /v1/models with a LoRA adapter: the base model, and the adapter with its parent.
MODELS = ('{"object":"list","data":[{"id":"kimi-k2.5","object":"model","owned_by":"vllm",'
          '"root":"/shared/kimi-k2.5-int4","parent":null,"max_model_len":131072},'
          '{"id":"sql-lora","object":"model","owned_by":"vllm","root":"/adapters/sql","parent":"kimi-k2.5"}]}')


def test_the_recording() -> None:
    api = api_facts(READY)
    assert api.answered and api.models_status == 401 and api.root is None
    assert version(READY, "") == "0.20.1"
    assert served_models(READY.models or HttpProbe(url="u")) == (
        None, "/v1/models refused the API key the bot holds for this service (401): check api_key_env")


def test_a_model_list_with_an_adapter() -> None:
    u = READY.model_copy(update={"models": HttpProbe(url="u", status=200, body=MODELS)})
    api = api_facts(u)
    assert (api.root, api.ids, api.max_model_len) == ("/shared/kimi-k2.5-int4", ("kimi-k2.5",), 131072)
    assert served_models(HttpProbe(url="u", status=200, body=MODELS)) == (
        ["kimi-k2.5", "/shared/kimi-k2.5-int4", "sql-lora", "/adapters/sql"], None)
    assert served_models(HttpProbe(url="u", status=200, body="<html>")) == (
        None, "/v1/models answered something that is not the OpenAI model list")


def test_the_version_falls_back_to_the_journals_banner() -> None:
    journal = ("Dec 02 13:26:14 gpu-node-1 python3[48211]: (APIServer pid=48211) INFO 12-02 13:26:14 "
               "[api_server.py:1952] vLLM server version 0.20.1, serving model /models/x\n")
    silent = READY.model_copy(update={"version": HttpProbe(url="u", curl_exit=7)})
    assert version(silent, journal) == "0.20.1" and version(silent, "") is None
    assert not api_facts(READY.model_copy(update={"health": None, "version": None, "models": None})).answered
