"""bot/understanding/model_answer.py: what the cluster's own model may say (issue 23, point 9) — the schema
offers questions only, and an answer is read back against the schema and the config, refused otherwise."""

from __future__ import annotations

import json

import pytest

from bot.understanding.model_answer import INTENTS, UNCLEAR, Refused, instructions, schema, user_text, validate
from config.models import BotConfig
from handlers.commands import COMMANDS

CONFIG = BotConfig.model_validate({
    "nodes": [{"name": "gpu-a", "host": "127.0.0.1"}, {"name": "gpu-b", "host": "127.0.0.1"}],
    "services": [{"name": "kimi", "node": "gpu-a", "unit": "vllm-kimi.service"},
                 {"name": "qwen", "node": "gpu-b", "unit": "vllm-qwen.service"},
                 {"name": "kimi", "node": "gpu-b", "unit": "vllm-kimi.service"}],
    "understanding": {"model": "qwen"}})
ORDERS = [c.name for c in COMMANDS if c.confirm]


def test_the_schema_offers_questions_and_the_configured_names_only() -> None:
    s = schema(CONFIG)
    props = s["properties"]
    assert isinstance(props, dict)
    offered = props["intent"]["enum"]
    assert set(offered) == {*INTENTS, UNCLEAR}
    assert ORDERS and not set(ORDERS) & set(offered)  # restart, bench, silence, unsilence, unlock, change, revert
    assert props["services"]["items"]["enum"] == ["kimi", "qwen"]
    assert props["nodes"]["items"]["enum"] == ["gpu-a", "gpu-b"]
    assert s["additionalProperties"] is False and s["required"] == ["intent", "services", "nodes"]
    json.dumps(s)  # goes into the request body as it is


def test_every_intent_offered_is_a_question_of_the_command_table() -> None:
    table = {c.name: c for c in COMMANDS}
    assert all(name in table and not table[name].confirm for name in INTENTS)


def test_nothing_configured_is_an_empty_list_not_an_empty_enum() -> None:
    props = schema(BotConfig())["properties"]
    assert isinstance(props, dict)
    assert props["services"] == {"type": "array", "maxItems": 0}


def test_instructions_name_the_intents_and_names_and_rule_out_orders() -> None:
    text = instructions(CONFIG)
    assert all(f"- {name}:" in text for name in INTENTS) and "kimi, qwen" in text and "gpu-a, gpu-b" in text
    assert "never yours to choose" in text


def test_user_text_is_bounded() -> None:
    assert user_text("  hi  ") == "hi" and len(user_text("x" * 10_000)) == 2000


def test_a_good_answer_becomes_a_reading_with_the_routers_targets() -> None:
    r = validate('{"intent": "logs", "services": ["kimi"], "nodes": []}', CONFIG)
    assert r is not None and r.intent == "logs" and r.explicit_target
    assert [(s.name, s.node) for s in r.services] == [("kimi", "gpu-a"), ("kimi", "gpu-b")]
    assert [n.name for n in r.nodes] == ["gpu-a", "gpu-b"] and r.named_services == ["kimi"]
    on_b = validate('{"intent": "status", "services": ["kimi"], "nodes": ["gpu-b"]}', CONFIG)
    assert on_b is not None and [(s.name, s.node) for s in on_b.services] == [("kimi", "gpu-b")]
    everything = validate('{"intent": "gpus", "services": [], "nodes": []}', CONFIG)
    assert everything is not None and not everything.explicit_target and len(everything.services) == 3


def test_unclear_is_no_reading() -> None:
    assert validate('{"intent": "unclear", "services": [], "nodes": []}', CONFIG) is None


@pytest.mark.parametrize(("content", "why"), [
    ('{"intent": "restart", "services": ["kimi"], "nodes": []}', "an order"),
    ('{"intent": "unlock", "services": ["kimi"], "nodes": []}', "an order"),
    ('{"intent": "revert", "services": [], "nodes": []}', "an order"),
    ('{"intent": "flag", "services": ["kimi"], "nodes": []}', "not one of the questions"),
    ('{"intent": "reboot_everything", "services": [], "nodes": []}', "not one of the questions"),
    ('{"intent": "status", "services": ["llama"], "nodes": []}', "not configured"),
    ('{"intent": "status", "services": [], "nodes": ["gpu-c"]}', "not configured"),
    ('{"intent": "status", "services": [], "nodes": [], "command": "id"}', "not the JSON"),
    ('{"intent": "status"', "not the JSON"),
    ("the status of kimi", "not the JSON"),
    ('["status"]', "not the JSON"),
    ('{"intent": "status", "services": "kimi", "nodes": []}', "not the JSON"),
    ('{"intent": "status", "services": [' + ",".join(['"kimi"'] * 40) + '], "nodes": []}', "not the JSON"),
])
def test_a_bad_answer_is_refused_with_a_reason(content: str, why: str) -> None:
    with pytest.raises(Refused, match=why):
        validate(content, CONFIG)
