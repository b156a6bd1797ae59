"""A settings change in a message (issue 25): ``change`` and ``revert`` are orders only as imperatives, a question
or a hypothetical about a change creates no request, and the words after the verb, the service left out, reach
the command as ``Args.change_text`` (never a shell). Corpus-style rows on the demo cluster's names."""

from __future__ import annotations

import shlex

import pytest

from bot.router import route
from bot.understanding.markup import read
from config.models import BotConfig
from services.change.spec import ChangeSpec, parse_text

CONFIG = BotConfig.model_validate({
    "nodes": [{"name": "gpu-a", "host": "127.0.0.1"}, {"name": "gpu-b", "host": "127.0.0.1"}],
    "services": [{"name": "kimi", "node": "gpu-a", "unit": "vllm-kimi-k25-int4.service"},
                 {"name": "kimi", "node": "gpu-b", "unit": "vllm-kimi-k25-int4.service"},
                 {"name": "qwen", "node": "gpu-b", "unit": "vllm-qwen.service"}],
})


def reading(text: str, surface: str = "slack") -> tuple[str, list[str], str | None, str | None, bool]:
    r = route(read(text, surface), CONFIG)  # type: ignore[arg-type]
    return (r.intent, sorted({f"{s.name}@{s.node}" for s in r.services}) if r.explicit_target else [],
            r.args.change_verb, r.args.change_text, r.asked)


@pytest.mark.parametrize(("text", "intent", "targets", "verb", "words"), [
    ("set max-num-seqs 256 on kimi", "change", ["kimi@gpu-a", "kimi@gpu-b"], "set", "max-num-seqs 256"),
    ("<@U0BOT> set --speculative-config '{\"method\":\"ngram\",\"num_speculative_tokens\":4}' on kimi", "change",
     ["kimi@gpu-a", "kimi@gpu-b"], "set", "--speculative-config '{\"method\":\"ngram\",\"num_speculative_tokens\":4}'"),
    ("unset --enforce-eager on kimi", "change", ["kimi@gpu-a", "kimi@gpu-b"], "unset", "--enforce-eager"),
    ("set env NCCL_PROTO=Simple on kimi on gpu-a", "change", ["kimi@gpu-a"], "set", "env NCCL_PROTO=Simple"),
    ("unset env NCCL_ALGO on qwen", "change", ["qwen@gpu-b"], "unset", "env NCCL_ALGO"),
    ("change kimi: --max-model-len 65536 --max-num-seqs 128", "change", ["kimi@gpu-a", "kimi@gpu-b"], "change",
     "--max-model-len 65536 --max-num-seqs 128"),
    ("please set max num seqs to 256 on qwen", "change", ["qwen@gpu-b"], "set", "max num seqs   256"),
    ("can you set --served-model-name 'on kimi' on qwen", "change", ["qwen@gpu-b"], "set",
     "--served-model-name 'on kimi'"),  # a quoted value is never taken for the service
    ("revert kimi", "revert", ["kimi@gpu-a", "kimi@gpu-b"], None, None),
    ("revert kimi on gpu-b", "revert", ["kimi@gpu-b"], None, None),
])
def test_orders_and_their_words(text: str, intent: str, targets: list[str], verb: str | None, words: str | None
                                ) -> None:
    got = reading(text)
    assert got[:4] == (intent, targets, verb, words)
    assert not got[4]


@pytest.mark.parametrize("text", [
    "set max-num-seqs 256 on kimi?", "set max-num-seqs 256 on kimi maybe", "set max-num-seqs 256 on kimi tomorrow",
    "revert kimi?", "should we set max-num-seqs 256 on kimi?", "what if we set max-num-seqs 256 on kimi",
    "did we set NCCL_P2P_LEVEL=SYS on kimi", "don't set max-num-seqs on kimi", "did you revert kimi?",
    "`set max-num-seqs 256 on kimi`", "~revert kimi~ nvm", "&gt; unset --enforce-eager on kimi\nwhat does this do?",
    "if we change kimi: --max-num-seqs 128 will it be faster", "set max-num-seqs 256",  # no service: which one?
    "<@U07OTHER> set max-num-seqs 256 on kimi",  # to someone else
])
def test_a_question_or_a_hypothetical_is_never_an_order(text: str) -> None:
    r = route(read(text, "slack", "U0BOT"), CONFIG)
    # An order is what would ask for a confirmation (bench/understanding.py's own test); a negated one may keep
    # its intent ("OK — I won't revert kimi.") while the command run is the information about it.
    assert not (r.matched and not r.asked and r.command.confirm), (text, r.command.name)
    assert r.args.change_text is None


def test_a_change_asked_as_a_question_offers_the_order() -> None:
    r = route(read("set max-num-seqs 256 on kimi?", "slack"), CONFIG)
    assert r.intent == "flag" and r.args.flag == "max-num-seqs" and r.asked
    assert r.note is not None and "`set max-num-seqs 256 on kimi`" in r.note
    assert r.offers == ["set max-num-seqs 256 on kimi"]


def test_a_service_nobody_knows_is_named_not_changed() -> None:
    r = route(read("set max-num-seqs 256 on kimmy2", "slack"), CONFIG)
    assert r.intent == "change" and r.unknown == ["kimmy2"]


def test_values_keep_slacks_markup_characters_and_quotes_the_way_they_were_typed() -> None:
    value = "a *b* _c_ :x: & <d> ~e~ `f` “g”"
    slack = f"<@U0BOT> set --chat-template '{value}' on kimi".replace("&", "&amp;").replace("<d>", "&lt;d&gt;")
    _, _, verb, text, _ = reading(slack)
    assert verb == "set" and text is not None and shlex.split(text) == ["--chat-template", value]
    spec = parse_text("set", text)
    assert isinstance(spec, ChangeSpec) and spec.set_flags == {"chat-template": value}
    # Typographic quotes around a value (a phone's keyboard) are quotes.
    _, _, _, text, _ = reading("set --chat-template “a b” on kimi")
    assert text is not None and shlex.split(text) == ["--chat-template", "a b"]
