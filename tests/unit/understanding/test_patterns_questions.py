"""The router on the patterns people write (issue 23): which question a message asks: status, throughput,
logs, charts, the audit, help, small talk, pasted errors and tables, emoji, and which of two questions decides.

Sentences written for this test, not corpus lines; the config and the reading are in pattern_cases.py.
"""

from __future__ import annotations

import pytest

from bot.router import route
from bot.understanding.markup import read
from tests.unit.understanding.pattern_cases import ALIASES, BOT, CFG, expect, outcome


@pytest.mark.parametrize(("text", "services"), [
    ("is kimi healthy right now", ["kimi"]), ("everything green?", []), ("any alerts firing", []),
    ("qwen looking ok?", ["qwen"]), ("<@U0BOT> any outages?", []), ("<@U0BOT> is the 32b degraded", ["qwen"]),
    ("how's qwen", ["qwen"]), ("services ok?", []), ("<@U0BOT> all systems go?", []),
])
def test_states_and_health_are_the_status(text: str, services: list[str]) -> None:
    expect(text, "status", services)


@pytest.mark.parametrize(("text", "services"), [
    ("what's the time to first token for qwen", ["qwen"]), ("kimi's inter-token latency", ["kimi"]),
    ("how many tokens per second does qwen generate", ["qwen"]), ("generation throughput kimi", ["kimi"]),
    ("<@U0BOT> how quickly is the 32b answering", ["qwen"]), ("mean time per output token on kimi", ["kimi"]),
])
def test_metrics_by_their_long_names_are_throughput(text: str, services: list[str]) -> None:
    expect(text, "throughput", services)


@pytest.mark.parametrize(("text", "services"), [
    ("how many times has kimi restarted", ["kimi"]), ("NRestarts on qwen?", ["qwen"]),
    ("when was the last time kimi restarted", ["kimi"]), ("did qwen go down and come back overnight", ["qwen"]),
    ("will a restart fix kimi's latency", ["kimi"]), ("if I restart qwen will it lose the cache", ["qwen"]),
    ("does kimi come back by itself if it crashes", ["kimi"]),
])
def test_restart_history_and_what_ifs_are_the_restart_information(text: str, services: list[str]) -> None:
    expect(text, "restarts", services)


@pytest.mark.parametrize(("text", "services"), [
    ("how do the two boxes differ in nccl env", []), ("how does kimi's config differ from qwen's", ["kimi", "qwen"]),
    ("line up kimi and qwen flags", ["kimi", "qwen"]),
])
def test_comparisons(text: str, services: list[str]) -> None:
    expect(text, "compare", services)


@pytest.mark.parametrize("text", ["what have you done today", "show your recent actions", "history of bot commands",
                                  "<@U0BOT> who used the bot to silence kimi"])
def test_what_the_bot_itself_did_is_the_audit(text: str) -> None:
    assert outcome(text)[0] == "audit", text


@pytest.mark.parametrize(("text", "services"), [
    ("what's new on kimi since yesterday", ["kimi"]), ("anything new with qwen's config since friday", ["qwen"]),
])
def test_whats_new_since_is_the_changes(text: str, services: list[str]) -> None:
    expect(text, "changes", services)


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("sam bounced kimi at 3. is it back?", "status", ["kimi"]),
    ("<@U0BOT> <@U05ANIKA2> restarted qwen this morning, what's the tok/s now", "throughput", ["qwen"]),
    ("i just restarted qwen by hand, is it up?", "status", ["qwen"]),
    ("is qwen up and what's its context length", "status", ["qwen"]),
    ("what's kimi's tp and is it healthy", "flag", ["kimi"]),
    ("qwen logs and gpu temps on gpu-b", "logs", ["qwen"]),
])
def test_the_question_decides_and_the_first_question_wins(text: str, intent: str, services: list[str]) -> None:
    expect(text, intent, services)


@pytest.mark.parametrize(("text", "intent", "services", "args"), [
    ("is the load format set to safetensors on kimi", "flag", ["kimi"],
     {"flag": "load-format", "value": "safetensors"}),
    ("max cudagraph capture size on qwen", "flag", ["qwen"], {"flag": "max-cudagraph-capture-size"}),
    ("is the api key env var set on qwen", "flag", ["qwen"], {"env": "VLLM_API_KEY"}),
    ("--help", "help", [], {}), ("tout est au vert ?", "status", [], {}), ("logs k2", "logs", ["kimi"], {}),
    ("plot the benchmark results for qwen", "chart_bench", ["qwen"], {}),
    ("kimi came back by itself. no restart needed", "restarts", ["kimi"], {"negated": True}),
])
def test_more_ways_of_writing(text: str, intent: str, services: list[str], args: dict[str, object]) -> None:
    expect(text, intent, services, **args)


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("qwen was crashlooping all night, can anyone tell me if it's stable now", "status", ["qwen"]),
    ("<@U0BOT> the 32b restarted twice overnight, is it steady?", "status", ["qwen"]),
    ("could you check if kimi's healthy", "status", ["kimi"]),
    ("what if we benched qwen while it's serving users", "bench", ["qwen"]),
])
def test_a_state_asked_about_and_a_state_as_context(text: str, intent: str, services: list[str]) -> None:
    # A statement before a question weighs half; "tell me if", "check if" open the question, "while" context.
    expect(text, intent, services)


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("<@U0BOT> qwen's config for the retro doc", "settings", ["qwen"]),
    ("kimi tok/s for the standup slides", "throughput", ["kimi"]),
])
def test_who_the_answer_is_for_is_no_topic(text: str, intent: str, services: list[str]) -> None:
    expect(text, intent, services)
    assert not route(read(text, "slack", BOT), CFG, ALIASES).asked, text  # "the docs" is not a second reading


@pytest.mark.parametrize("text", ["RuntimeError: CUDA error: an illegal memory access was encountered",
                                  "<@U0BOT> torch.OutOfMemoryError tried to allocate 2.00 GiB"])
def test_a_pasted_error_that_asks_nothing_is_not_placed(text: str) -> None:
    assert outcome(text)[0] == "unclear"


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("how's kimi's ttft looking", "throughput", ["kimi"]), ("how's qwen's context length", "flag", ["qwen"]),
    ("how's kimi", "status", ["kimi"]),
])
def test_hows_x_is_the_status_unless_a_thing_of_x_is_named(text: str, intent: str, services: list[str]) -> None:
    expect(text, intent, services)


def test_a_second_question_after_also_is_offered_with_its_own_node() -> None:
    r = route(read("<@U0BOT> kimi logs, also how's gpu-a's temperature", "slack", BOT), CFG, ALIASES)
    assert (r.intent, r.named_services, r.named_nodes) == ("logs", ["kimi"], [])
    assert r.offers == ["gpus kimi"]


@pytest.mark.parametrize("text", ["what can you tell me", "<@U0BOT> what do you know", "list your capabilities"])
def test_what_the_bot_can_do_is_help(text: str) -> None:
    assert outcome(text)[0] == "help"


@pytest.mark.parametrize("text", ["did qwen print anything odd", "what has kimi logged since the restart"])
def test_what_a_service_printed_is_its_logs(text: str) -> None:
    assert outcome(text)[0] == "logs", text


@pytest.mark.parametrize(("text", "intent", "window"), [
    ("qwen throughput over the last 3 days", "chart_throughput", 259200),
    ("kimi tok/s over the past week", "chart_throughput", 604800),
    ("kimi logs over the last hour", "logs", None),
])
def test_a_measure_over_a_window_is_its_chart(text: str, intent: str, window: int | None) -> None:
    r = route(read(text, "terminal"), CFG, ALIASES)
    assert (r.intent, r.args.window_s) == (intent, window), text


@pytest.mark.parametrize(("text", "intent"), [("who's using the gpus on gpu-b", "gpus"),
                                              ("who used the bot to silence qwen", "audit"),
                                              ("kimi any errors", "logs")])
def test_who_is_using_the_gpus_is_not_who_used_the_bot(text: str, intent: str) -> None:
    assert outcome(text)[0] == intent, text


@pytest.mark.parametrize(("text", "intent"), [
    ("how are we doing on latency", "throughput"), ("how are things with the kv cache dtype on kimi", "flag"),
    ("how are we doing", "status"), ("<@U0BOT> bye", "smalltalk"), ("see you tomorrow", "smalltalk"),
])
def test_how_are_we_doing_on_a_thing_is_that_thing(text: str, intent: str) -> None:
    assert outcome(text)[0] == intent, text


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("did the bot touch anything today", "audit", []), ("wie geht's qwen?", "status", ["qwen"]),
])
def test_the_bots_record_and_how_a_service_is_going(text: str, intent: str, services: list[str]) -> None:
    expect(text, intent, services)
    assert route(read(text, "terminal"), CFG, ALIASES).unknown == [], text


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("<@U0BOT> :chart_with_upwards_trend: qwen 6h", "chart_throughput", ["qwen"]),
    ("📈 kimi", "chart_throughput", ["kimi"]), ("<@U0BOT> :thermometer: qwen", "gpus", ["qwen"]),
    ("<@U0BOT> :scroll: kimi", "logs", ["kimi"]), ("<@U0BOT> :eyes: qwen", "status", ["qwen"]),
])
def test_an_emoji_that_asks_is_read_as_its_question(text: str, intent: str, services: list[str]) -> None:
    expect(text, intent, services)


@pytest.mark.parametrize("text", [
    "INFO 12-05 04:01:10 [loader.py:211] Loading safetensors checkpoint shards:  31% Completed | 37/119",
    "(VllmWorker rank=1 pid=9) WARNING 12-05 04:01:10 [custom_all_reduce.py:136] Custom allreduce is disabled",
    "Dec 05 04:01:10 gpu-b vllm[812]: ERROR: max_model_len is greater than the derived max_model_len",
    "2026-12-05 04:01:10,551 ERROR tensor parallel group failed to initialise",
])
def test_a_pasted_log_line_asks_nothing(text: str) -> None:
    r = route(read("<@U0BOT> " + text, "slack", BOT), CFG, ALIASES)
    assert not r.matched and not r.asked and r.unknown == [], text


def test_a_pasted_log_line_then_a_question_answers_the_question() -> None:
    expect("<@U0BOT> ERROR 12-05 04:01:10 [engine.py:160] CUDA out of memory\nqwen logs?", "logs", ["qwen"])


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("<@U0BOT> dump kimi's knobs", "settings", ["kimi"]), ("which options is qwen started with", "settings", ["qwen"]),
    ("is there a restart cooldown on qwen", "restarts", ["qwen"]), ("can the bot draw charts?", "help", []),
    ("does the bot speak french", "help", []),
])
def test_knobs_cooldowns_and_the_bot_in_the_third_person(text: str, intent: str, services: list[str]) -> None:
    expect(text, intent, services)
    assert route(read(text, "terminal"), CFG, ALIASES).unknown == [], text


@pytest.mark.parametrize(("text", "intent"), [
    ("how do i silence alerts", "help"), ("how do i mute alerts on qwen", "help"), ("is kimi silenced", "status"),
])
def test_how_to_silence_is_help_and_whether_silenced_is_status(text: str, intent: str) -> None:
    assert outcome(text)[0] == intent, text


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("morning all", "smalltalk", []), ("thanks all", "smalltalk", []), ("hey, check qwen", "status", ["qwen"]),
    ("how do you work", "help", []),
])
def test_a_greeting_beside_weak_words_is_the_message(text: str, intent: str, services: list[str]) -> None:
    expect(text, intent, services)


def test_an_emoji_leaves_no_mark_in_the_plain_text() -> None:
    assert read("<@U0BOT> kimi :skull: restart it", "slack", BOT).plain.split() == ["kimi", "restart", "it"]


@pytest.mark.parametrize(("text", "intent"), [
    ("is qwen locked", "unlock"), ("any locks on kimi?", "unlock"),
    ("the pager fired for qwen at 2am, what's it look like now", "status"),
    ("what does the log look like on qwen", "logs"),
])
def test_locks_asked_about_and_how_things_look(text: str, intent: str) -> None:
    got, _, order, _ = outcome(text)
    assert got in (intent, "restarts") if intent == "unlock" else got == intent, text
    assert not order, text


def test_a_pasted_table_asks_nothing() -> None:
    text = ("<@U0BOT> +-----------------------------------------+\n"
            "| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |")
    r = route(read(text, "slack", BOT), CFG, ALIASES)
    assert not r.matched and r.unknown == []


def test_lat_and_tput_are_throughput() -> None:
    assert outcome("lat on kimi?")[0] == "throughput" and outcome("qwen tput")[0] == "throughput"


@pytest.mark.parametrize(("text", "intent"), [
    ("can the bot draw graphs in slack", "help"), ("is there a json output for status", "help"),
    ("give me an example of a throughput question", "help"), ("what did the bot do last night", "audit"),
])
def test_questions_about_the_bots_own_features(text: str, intent: str) -> None:
    assert outcome(text)[0] == intent, text


@pytest.mark.parametrize(("text", "intent", "args"), [
    ("qwen's bench history", "chart_bench", {}), ("is qwen on int4 weights", "flag", {"flag": "quantization"}),
    ("how many req/s is qwen serving", "throughput", {}), ("qwen err log", "logs", {}),
])
def test_bench_history_weights_rates_and_err(text: str, intent: str, args: dict[str, object]) -> None:
    expect(text, intent, ["qwen"], **args)
    assert route(read(text, "terminal"), CFG, ALIASES).unknown == [], text


@pytest.mark.parametrize(("text", "intent"), [("welcome back bot", "smalltalk"), ("are you a bot?", "help")])
def test_greetings_and_what_the_bot_is(text: str, intent: str) -> None:
    assert outcome(text)[0] == intent, text


def test_an_emoji_to_the_bot_by_name_is_small_talk() -> None:
    assert outcome("<@U0BOT> :wave: bot")[0] == "smalltalk"
