"""The router on the patterns people write (issue 23), each with sentences written for this test — not corpus
lines: a pattern is learnt when new sentences in it are read right.

Each case: the text, the intent (the answer the person wanted), the services named, whether it is an order
(a confirmation follows), and the typed arguments that matter.
"""

from __future__ import annotations

import pytest

from bot.router import route
from bot.understanding.markup import read
from bot.understanding.names import service_aliases
from config.loader import parse_config

CFG = parse_config("""
[[nodes]]
name = "gpu-a"
host = "h1"
[[nodes]]
name = "gpu-b"
host = "h2"
[[services]]
name = "kimi"
node = "gpu-a"
unit = "vllm-kimi-k25-int4.service"
[[services]]
name = "qwen"
node = "gpu-b"
unit = "vllm-qwen3.service"
""")
ALIASES = service_aliases(CFG, {("kimi", "gpu-a"): ["kimi-k2.5", "/shared/kimi-k2.5-int4"],
                                ("qwen", "gpu-b"): ["Qwen/Qwen3-32B"]})
BOT = "U0BOT"


def _read(text: str) -> tuple[str, list[str], bool, dict[str, object]]:
    surface = "slack" if text.startswith("<@") else "terminal"
    r = route(read(text, surface, BOT if surface == "slack" else None), CFG, ALIASES)
    order = r.command.confirm and not r.asked and r.matched
    args = {k: v for k, v in r.args.model_dump().items() if k in ("flag", "env", "value", "force", "negated") and v}
    return (r.intent if r.matched else "unclear"), sorted(r.named_services), order, args


def _case(text: str, intent: str, services: list[str], order: bool = False, **args: object) -> None:
    got_intent, got_services, got_order, got_args = _read(text)
    assert (got_intent, got_services, got_order) == (intent, sorted(services), order), text
    assert all(got_args.get(k) == v for k, v in args.items()), (text, got_args)


@pytest.mark.parametrize(("text", "services"), [
    ("is kimi healthy right now", ["kimi"]), ("everything green?", []), ("any alerts firing", []),
    ("qwen looking ok?", ["qwen"]), ("<@U0BOT> any outages?", []), ("<@U0BOT> is the 32b degraded", ["qwen"]),
    ("how's qwen", ["qwen"]), ("services ok?", []), ("<@U0BOT> all systems go?", []),
])
def test_states_and_health_are_the_status(text: str, services: list[str]) -> None:
    _case(text, "status", services)


@pytest.mark.parametrize(("text", "services"), [
    ("what's the time to first token for qwen", ["qwen"]), ("kimi's inter-token latency", ["kimi"]),
    ("how many tokens per second does qwen generate", ["qwen"]), ("generation throughput kimi", ["kimi"]),
    ("<@U0BOT> how quickly is the 32b answering", ["qwen"]), ("mean time per output token on kimi", ["kimi"]),
])
def test_metrics_by_their_long_names_are_throughput(text: str, services: list[str]) -> None:
    _case(text, "throughput", services)


@pytest.mark.parametrize(("text", "service", "force"), [
    ("force-restart qwen", "qwen", True), ("hard-restart kimi pls", "kimi", False), ("re-start qwen", "qwen", False),
    ("stop and start kimi", "kimi", False), ("power-cycle qwen", "qwen", False), ("give kimi a kick", "kimi", False),
    ("do a clean restart of qwen", "qwen", False), ("<@U0BOT> trigger a restart of kimi", "kimi", False),
    ("relaunch the 32b", "qwen", False), ("kick off a restart of kimi", "kimi", False),
])
def test_compound_restart_verbs_are_orders(text: str, service: str, force: bool) -> None:
    _case(text, "restart", [service], order=True)
    assert _read(text)[3].get("force", False) is force


@pytest.mark.parametrize(("text", "services"), [
    ("restart kimi, or is that overkill?", ["kimi"]), ("restart qwen. is that ok?", ["qwen"]),
    ("restart kimi unless someone objects", ["kimi"]), ("bounce qwen, good idea?", ["qwen"]),
    ("restart kimi at the top of the hour", ["kimi"]), ("restart qwen around 5pm", ["qwen"]),
    ("restart of kimi scheduled for tonight", ["kimi"]), ("restart kimi, said no one", ["kimi"]),
    ("<@U0BOT> <@U07ABCDEF> can you bounce qwen", ["qwen"]), ("reinicia kimi más tarde", ["kimi"]),
    ("tu peux redémarrer qwen demain ?", ["qwen"]), ("稍后重启 kimi", ["kimi"]), ("加载完之后再重启 qwen", ["qwen"]),
])
def test_doubt_time_and_someone_else_never_leave_an_order(text: str, services: list[str]) -> None:
    intent, got, order, _ = _read(text)
    assert not order and intent == "restarts" and got == services, text


@pytest.mark.parametrize(("text", "service"), [
    ("tu peux redémarrer kimi ?", "kimi"), ("pouvez-vous redémarrer qwen", "qwen"),
    ("kannst du kimi neu starten?", "kimi"), ("¿puedes reiniciar qwen?", "qwen"), ("请重启 kimi", "kimi"),
    ("qwenを再起動してください", "qwen"),
])
def test_polite_requests_in_other_languages_are_orders(text: str, service: str) -> None:
    _case(text, "restart", [service], order=True)


@pytest.mark.parametrize(("text", "intent", "services", "order"), [
    ("kick the bench on qwen", "bench", ["qwen"], True), ("kick qwen, it's stuck", "restart", ["qwen"], True),
    ("kick off the benchmark for kimi", "bench", ["kimi"], True),
    ("don't run a bench on kimi", "bench", ["kimi"], False),
])
def test_a_verb_several_orders_share_is_the_order_its_object_names(text: str, intent: str, services: list[str],
                                                                   order: bool) -> None:
    _case(text, intent, services, order=order)


@pytest.mark.parametrize(("text", "services"), [
    ("how many times has kimi restarted", ["kimi"]), ("NRestarts on qwen?", ["qwen"]),
    ("when was the last time kimi restarted", ["kimi"]), ("did qwen go down and come back overnight", ["qwen"]),
    ("will a restart fix kimi's latency", ["kimi"]), ("if I restart qwen will it lose the cache", ["qwen"]),
    ("does kimi come back by itself if it crashes", ["kimi"]),
])
def test_restart_history_and_what_ifs_are_the_restart_information(text: str, services: list[str]) -> None:
    _case(text, "restarts", services)


@pytest.mark.parametrize(("text", "service", "flag", "value"), [
    ("how much context does kimi support", "kimi", "max-model-len", None),
    ("is custom allreduce off on qwen", "qwen", "disable-custom-all-reduce", None),
    ("mem utilization kimi", "kimi", "gpu-memory-utilization", None),
    ("<@U0BOT> what precision is the kv cache of qwen in", "qwen", "kv-cache-dtype", None),
    ("how many gpus does kimi shard over", "kimi", "tensor-parallel-size", None),
    ("is kimi at 64k context", "kimi", "max-model-len", "65536"), ("qwen 32k?", "qwen", "max-model-len", "32768"),
    ("is qwen running with 90% mem util", "qwen", "gpu-memory-utilization", "0.9"),
    ("tp4 on kimi?", "kimi", "tensor-parallel-size", "4"), ("is qwen on fp16?", "qwen", "dtype", "float16"),
    ("is the kv cache fp8 on kimi", "kimi", "kv-cache-dtype", "fp8"),
])
def test_flags_by_what_they_do_and_values_as_the_flag_takes_them(text: str, service: str, flag: str,
                                                                 value: str | None) -> None:
    _case(text, "flag", [service], flag=flag, **({"value": value} if value else {}))


def test_memory_utilization_of_a_node_is_the_gpus() -> None:
    intent, _, _, args = _read("memory utilization on gpu-b")
    assert intent == "gpus" and not args


@pytest.mark.parametrize(("text", "services", "env"), [
    ("is NCCL_P2P_DISABLE set in the env for kimi", ["kimi"], "NCCL_P2P_DISABLE"),
    ("is the hf token in qwen's environment", ["qwen"], "HF_TOKEN"),
    ("is hf_transfer enabled on kimi", ["kimi"], "HF_HUB_ENABLE_HF_TRANSFER"),
    ("is the engine ready timeout set for qwen", ["qwen"], "VLLM_ENGINE_READY_TIMEOUT_S"),
])
def test_environment_questions(text: str, services: list[str], env: str) -> None:
    _case(text, "flag", services, env=env)


@pytest.mark.parametrize(("text", "services"), [
    ("how do the two boxes differ in nccl env", []), ("how does kimi's config differ from qwen's", ["kimi", "qwen"]),
    ("line up kimi and qwen flags", ["kimi", "qwen"]),
])
def test_comparisons(text: str, services: list[str]) -> None:
    _case(text, "compare", services)


@pytest.mark.parametrize("text", ["what have you done today", "show your recent actions", "history of bot commands",
                                  "<@U0BOT> who used the bot to silence kimi"])
def test_what_the_bot_itself_did_is_the_audit(text: str) -> None:
    assert _read(text)[0] == "audit", text


@pytest.mark.parametrize(("text", "services"), [
    ("what's new on kimi since yesterday", ["kimi"]), ("anything new with qwen's config since friday", ["qwen"]),
])
def test_whats_new_since_is_the_changes(text: str, services: list[str]) -> None:
    _case(text, "changes", services)


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("sam bounced kimi at 3. is it back?", "status", ["kimi"]),
    ("<@U0BOT> <@U05ANIKA2> restarted qwen this morning, what's the tok/s now", "throughput", ["qwen"]),
    ("i just restarted qwen by hand, is it up?", "status", ["qwen"]),
    ("is qwen up and what's its context length", "status", ["qwen"]),
    ("what's kimi's tp and is it healthy", "flag", ["kimi"]),
    ("qwen logs and gpu temps on gpu-b", "logs", ["qwen"]),
])
def test_the_question_decides_and_the_first_question_wins(text: str, intent: str, services: list[str]) -> None:
    _case(text, intent, services)


@pytest.mark.parametrize(("text", "services"), [("is the 32b up", ["qwen"]), ("how's k25 doing", ["kimi"]),
                                                ("is the int4 one loaded", ["kimi"]), ("the 1T model status", [])])
def test_model_nicknames(text: str, services: list[str]) -> None:
    _case(text, "status", services)


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
    _case(text, intent, services, **args)


def test_a_question_about_doing_an_order_is_understood_as_it_and_starts_nothing() -> None:
    for text in ("should we bench kimi again", "what if we silenced qwen for the migration"):
        intent, _, order, _ = _read(text)
        assert intent in ("bench", "silence") and not order, text


@pytest.mark.parametrize(("text", "services"), [
    ("restart qwen once the shards are all loaded", ["qwen"]), ("bounce kimi when its gpus are idle", ["kimi"]),
    ("should we restart qwen or just wait out the loading", ["qwen"]),
    ("do we bounce kimi or check its logs first", ["kimi"]),
])
def test_a_condition_or_an_alternative_after_an_order_is_context(text: str, services: list[str]) -> None:
    # What the condition or the alternative talks about (loading, gpus, logs) is not the question.
    intent, got, order, _ = _read(text)
    assert (intent, got, order) == ("restarts", services, False), text


@pytest.mark.parametrize(("text", "intent", "services", "order"), [
    ("remove the silence on kimi", "unsilence", ["kimi"], True), ("cancel qwen's mute", "unsilence", ["qwen"], True),
    ("<@U0BOT> drop the snooze on kimi", "unsilence", ["kimi"], True),
    ("stop the alerts for qwen 1h", "silence", ["qwen"], True),
    ("don't lift the silence on kimi yet", "unsilence", ["kimi"], False),
])
def test_a_verb_that_undoes_with_the_silence_as_its_object_is_the_unsilence(text: str, intent: str,
                                                                          services: list[str], order: bool) -> None:
    _case(text, intent, services, order)


@pytest.mark.parametrize(("text", "intent"), [
    ("can we unlock kimi?", "unlock"), ("could we bench qwen this afternoon", "bench"),
    ("may i unsilence kimi", "unsilence"),
])
def test_can_we_asks_about_doing_an_order_and_starts_nothing(text: str, intent: str) -> None:
    got, _, order, _ = _read(text)
    assert (got, order) == (intent, False), text


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("qwen was crashlooping all night, can anyone tell me if it's stable now", "status", ["qwen"]),
    ("<@U0BOT> the 32b restarted twice overnight, is it steady?", "status", ["qwen"]),
    ("could you check if kimi's healthy", "status", ["kimi"]),
    ("what if we benched qwen while it's serving users", "bench", ["qwen"]),
])
def test_a_state_asked_about_and_a_state_as_context(text: str, intent: str, services: list[str]) -> None:
    # A statement before a question weighs half; "tell me if", "check if" open the question, "while" context.
    _case(text, intent, services)


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("<@U0BOT> qwen's config for the retro doc", "settings", ["qwen"]),
    ("kimi tok/s for the standup slides", "throughput", ["kimi"]),
])
def test_who_the_answer_is_for_is_no_topic(text: str, intent: str, services: list[str]) -> None:
    _case(text, intent, services)
    assert not route(read(text, "slack", BOT), CFG, ALIASES).asked, text  # "the docs" is not a second reading


def test_do_it_after_an_order_said_as_a_noun_asks_back_and_never_confirms() -> None:
    for text in ("<@U0BOT> qwen needs a restart, please do it", "kimi could use a bounce. go ahead"):
        r = route(read(text, "slack", BOT), CFG, ALIASES)
        assert r.asked and r.note is not None and r.note.startswith("Did you want me to restart"), text
        assert not (r.command.confirm and not r.asked), text
    intent, _, order, args = _read("qwen needs a restart, don't do it")
    assert (intent, order, args.get("negated")) == ("restarts", False, True)


@pytest.mark.parametrize("text", ["RuntimeError: CUDA error: an illegal memory access was encountered",
                                  "<@U0BOT> torch.OutOfMemoryError tried to allocate 2.00 GiB"])
def test_a_pasted_error_that_asks_nothing_is_not_placed(text: str) -> None:
    assert _read(text)[0] == "unclear"


@pytest.mark.parametrize(("text", "services"), [("welche flags verwendet kimi", ["kimi"]),
                                                ("¿qué flags usa qwen?", ["qwen"])])
def test_verbs_of_using_in_other_languages_are_no_names(text: str, services: list[str]) -> None:
    r = route(read(text, "terminal"), CFG, ALIASES)
    assert (r.intent, sorted(r.named_services), r.unknown) == ("settings", services, []), text


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("ne touche pas à qwen, ne le redémarre pas", "restarts", ["qwen"]),
    ("don't touch kimi and don't restart it", "restarts", ["kimi"]),
])
def test_a_prohibition_is_about_the_order_it_forbids(text: str, intent: str, services: list[str]) -> None:
    _case(text, intent, services, negated=True)


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("how's kimi's ttft looking", "throughput", ["kimi"]), ("how's qwen's context length", "flag", ["qwen"]),
    ("how's kimi", "status", ["kimi"]),
])
def test_hows_x_is_the_status_unless_a_thing_of_x_is_named(text: str, intent: str, services: list[str]) -> None:
    _case(text, intent, services)


def test_a_second_question_after_also_is_offered_with_its_own_node() -> None:
    r = route(read("<@U0BOT> kimi logs, also how's gpu-a's temperature", "slack", BOT), CFG, ALIASES)
    assert (r.intent, r.named_services, r.named_nodes) == ("logs", ["kimi"], [])
    assert r.offers == ["gpus kimi"]


@pytest.mark.parametrize("text", ["what can you tell me", "<@U0BOT> what do you know", "list your capabilities"])
def test_what_the_bot_can_do_is_help(text: str) -> None:
    assert _read(text)[0] == "help"


@pytest.mark.parametrize(("text", "service"), [
    ("reinició qwen", "qwen"), ("reinicié kimi hace una hora", "kimi"), ("he reiniciado qwen", "qwen"),
    ("j'ai redémarré kimi", "kimi"), ("我重启了 qwen", "qwen"), ("kimiを再起動しました", "kimi"),
    ("qwen wurde neugestartet", "qwen"), ("¿quién reinició kimi?", "kimi"),
])
def test_a_restart_in_the_past_in_another_language_is_never_an_order(text: str, service: str) -> None:
    intent, services, order, _ = _read(text)
    assert (intent, services, order) == ("restarts", [service], False), text


@pytest.mark.parametrize("text", ["reinicia kimi", "redémarre kimi", "请重启 kimi", "kimiを再起動して"])
def test_the_same_verbs_as_requests_are_still_orders(text: str) -> None:
    _case(text, "restart", ["kimi"], True)


@pytest.mark.parametrize("text", ["did qwen print anything odd", "what has kimi logged since the restart"])
def test_what_a_service_printed_is_its_logs(text: str) -> None:
    assert _read(text)[0] == "logs", text


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
    assert _read(text)[0] == intent, text


@pytest.mark.parametrize(("text", "flag", "value"), [
    ("does kimi load from safetensors", "load-format", "safetensors"),
    ("does qwen quantize with awq", "quantization", "awq"),
])
def test_a_setting_named_by_its_value_takes_the_words_of_its_own_name(text: str, flag: str, value: str) -> None:
    _case(text, "flag", [text.split()[1]], flag=flag, value=value)


def test_the_names_in_a_condition_after_an_order_are_not_its_targets() -> None:
    for text, service in (("restart qwen when kimi is done loading", "qwen"), ("bench kimi once qwen is idle", "kimi")):
        r = route(read(text, "terminal"), CFG, ALIASES)
        assert (r.named_services, r.asked) == ([service], True), text
        assert r.note is not None and f" {service}?" in r.note and "kimi qwen" not in r.note, text


@pytest.mark.parametrize(("text", "intent"), [
    ("<@U0BOT> bench finished on qwen. what were the numbers?", "throughput"),
    ("<@U0BOT> any ecc errors on gpu-a", "gpus"),
])
def test_a_report_of_an_order_asks_nothing_and_the_question_after_it_decides(text: str, intent: str) -> None:
    assert _read(text)[0] == intent, text


@pytest.mark.parametrize(("text", "intent", "order"), [
    ("<@U0BOT> restart kimi...?", "restarts", False), ("restart qwen. . ?", "restarts", False),
    ("restart qwen soonish", "restarts", False), ("bounce kimi 5ish", "restarts", False),
    ("restart kimi...", "restart", True),
])
def test_a_question_mark_after_the_dots_and_a_rough_time_leave_no_order(text: str, intent: str, order: bool) -> None:
    got, _, got_order, _ = _read(text)
    assert (got, got_order) == (intent, order), text


@pytest.mark.parametrize(("text", "intent"), [
    ("how are we doing on latency", "throughput"), ("how are things with the kv cache dtype on kimi", "flag"),
    ("how are we doing", "status"), ("<@U0BOT> bye", "smalltalk"), ("see you tomorrow", "smalltalk"),
])
def test_how_are_we_doing_on_a_thing_is_that_thing(text: str, intent: str) -> None:
    assert _read(text)[0] == intent, text


def test_one_order_wanted_as_a_noun_is_asked_back_and_its_history_is_not() -> None:
    for text in ("need a restart on qwen please", "kimi could use a bounce, please"):
        r = route(read(text, "terminal"), CFG, ALIASES)
        assert r.asked and r.note is not None and r.note.startswith("Did you want me to restart"), text
    for text in ("restart history for kimi please", "the last restart of qwen please"):
        r = route(read(text, "terminal"), CFG, ALIASES)
        assert (r.intent, r.asked) == ("restarts", False), text


@pytest.mark.parametrize("text", ["restart kimi :thinking_face:", "<@U0BOT> bounce qwen 🤷", "restart kimi... nah",
                                  "restart qwen post-lunch", "restart kimi pre-standup", "bounce qwen during the sync"])
def test_a_doubting_emoji_a_nah_and_an_event_to_wait_for_leave_no_order(text: str) -> None:
    assert not _read(text)[2], text


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("did the bot touch anything today", "audit", []), ("wie geht's qwen?", "status", ["qwen"]),
])
def test_the_bots_record_and_how_a_service_is_going(text: str, intent: str, services: list[str]) -> None:
    _case(text, intent, services)
    assert route(read(text, "terminal"), CFG, ALIASES).unknown == [], text


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("qwen sttngs", "settings", ["qwen"]), ("lgs for kimi", "logs", ["kimi"]), ("stts qwen?", "status", ["qwen"]),
    ("how's kimi's thrpt", "throughput", ["kimi"]),
])
def test_a_command_word_without_its_vowels_is_that_word(text: str, intent: str, services: list[str]) -> None:
    _case(text, intent, services)


@pytest.mark.parametrize(("text", "services", "order"), [
    ("bounce qwn", ["qwen"], True), ("is kmi up", ["kimi"], False), ("status of qen", ["qwen"], False),
])
def test_a_four_letter_name_missing_an_inner_letter_is_that_name(text: str, services: list[str], order: bool) -> None:
    intent = "restart" if order else "status"
    _case(text, intent, services, order)


def test_a_name_missing_its_first_or_last_letter_is_not_that_name() -> None:
    assert _read("is kim up")[1] == [] and _read("is wen up")[1] == []


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("what can u do", "help", []), ("r we live on qwen", "status", ["qwen"]),
    ("kimi launch cmd", "settings", ["kimi"]), ("what changed on qwen since yday", "changes", ["qwen"]),
])
def test_chat_shorthand_is_the_word_it_stands_for(text: str, intent: str, services: list[str]) -> None:
    _case(text, intent, services)


@pytest.mark.parametrize("text", ["restart kimi l8r", "bounce qwen b4 standup", "restart kimi 2nite"])
def test_shorthand_for_later_leaves_no_order(text: str) -> None:
    assert not _read(text)[2], text


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("<@U0BOT> :chart_with_upwards_trend: qwen 6h", "chart_throughput", ["qwen"]),
    ("📈 kimi", "chart_throughput", ["kimi"]), ("<@U0BOT> :thermometer: qwen", "gpus", ["qwen"]),
    ("<@U0BOT> :scroll: kimi", "logs", ["kimi"]), ("<@U0BOT> :eyes: qwen", "status", ["qwen"]),
])
def test_an_emoji_that_asks_is_read_as_its_question(text: str, intent: str, services: list[str]) -> None:
    _case(text, intent, services)


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
    _case("<@U0BOT> ERROR 12-05 04:01:10 [engine.py:160] CUDA out of memory\nqwen logs?", "logs", ["qwen"])


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("<@U0BOT> dump kimi's knobs", "settings", ["kimi"]), ("which options is qwen started with", "settings", ["qwen"]),
    ("is there a restart cooldown on qwen", "restarts", ["qwen"]), ("can the bot draw charts?", "help", []),
    ("does the bot speak french", "help", []),
])
def test_knobs_cooldowns_and_the_bot_in_the_third_person(text: str, intent: str, services: list[str]) -> None:
    _case(text, intent, services)
    assert route(read(text, "terminal"), CFG, ALIASES).unknown == [], text


@pytest.mark.parametrize(("text", "services"), [
    ("logs for qweb", ["qwen"]), ("is kimo up", ["kimi"]), ("settings kimu", ["kimi"]), ("qwrn status", ["qwen"]),
])
def test_a_short_name_with_a_neighbouring_key_hit_is_that_name(text: str, services: list[str]) -> None:
    assert _read(text)[1] == services, text


def test_a_short_name_with_a_far_key_hit_is_not_that_name() -> None:
    assert _read("is kiri up")[1] == [] and _read("status of qwer")[1] == []


@pytest.mark.parametrize("text", ["are the cards on gpu-b overheating", "is gpu-a throttling", "gpus spiking?"])
def test_an_english_word_with_an_ending_is_not_an_unknown_name(text: str) -> None:
    assert route(read(text, "terminal"), CFG, ALIASES).unknown == [], text


@pytest.mark.parametrize(("text", "services"), [
    ("nobody touch kimi pls, i'm tracing it", ["kimi"]), ("hands off qwen until the eval is done", ["qwen"]),
    ("leave kimi alone", ["kimi"]), ("<@U0BOT> do not touch qwen", ["qwen"]),
])
def test_keeping_hands_off_a_service_is_a_negated_restart(text: str, services: list[str]) -> None:
    _case(text, "restarts", services, negated=True)


@pytest.mark.parametrize(("text", "intent"), [
    ("how do i silence alerts", "help"), ("how do i mute alerts on qwen", "help"), ("is kimi silenced", "status"),
])
def test_how_to_silence_is_help_and_whether_silenced_is_status(text: str, intent: str) -> None:
    assert _read(text)[0] == intent, text


def test_tool_calling_switched_on_is_the_auto_tool_choice_flag() -> None:
    _case("is tool calling enabled on qwen", "flag", ["qwen"], flag="enable-auto-tool-choice")
    _case("which tool parser does qwen use", "flag", ["qwen"], flag="tool-call-parser")


@pytest.mark.parametrize(("text", "nodes"), [
    ("gpub status", ["gpu-b"]), ("logs on gpu_a", ["gpu-a"]), ("is gpu.b up", ["gpu-b"]),
])
def test_a_node_with_its_joiner_left_out_or_changed_is_that_node(text: str, nodes: list[str]) -> None:
    r = route(read(text, "terminal"), CFG, ALIASES)
    assert (sorted(r.named_nodes), r.unknown) == (nodes, []), text


def test_another_node_without_its_joiner_is_still_unknown() -> None:
    assert route(read("gpuc status", "terminal"), CFG, ALIASES).unknown == ["gpuc"]


@pytest.mark.parametrize(("text", "flag"), [
    ("¿qué puerto usa qwen?", "port"), ("kimi 用哪个端口", "port"), ("kimiのテンソル並列は？", "tensor-parallel-size"),
    ("qwen 的流水线并行", "pipeline-parallel-size"), ("welche quantisierung nutzt qwen", "quantization"),
    ("le parallélisme de tenseurs de qwen ?", "tensor-parallel-size"),
])
def test_flags_by_their_words_in_other_languages(text: str, flag: str) -> None:
    services = ["kimi"] if "kimi" in text else ["qwen"]
    _case(text, "flag", services, flag=flag)


@pytest.mark.parametrize("text", ["what swap backend does qwen use", "which attention backend env is on qwen"])
def test_a_settings_word_where_a_name_could_stand_is_no_unknown_name(text: str) -> None:
    assert route(read(text, "terminal"), CFG, ALIASES).unknown == [], text


@pytest.mark.parametrize(("text", "intent"), [
    ("what's the gpu util knob on kimi", "flag"), ("gpu util setting for qwen", "flag"),
    ("gpu util on kimi", "gpus"), ("gpu util on gpu-b", "gpus"),
])
def test_the_gpus_utilisation_with_a_word_of_setting_is_the_flag(text: str, intent: str) -> None:
    assert _read(text)[0] == intent, text


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("morning all", "smalltalk", []), ("thanks all", "smalltalk", []), ("hey, check qwen", "status", ["qwen"]),
    ("how do you work", "help", []),
])
def test_a_greeting_beside_weak_words_is_the_message(text: str, intent: str, services: list[str]) -> None:
    _case(text, intent, services)


@pytest.mark.parametrize("text", ["<@U0BOT> :no_entry: restart kimi", "<@U0BOT> restart qwen :soon:",
                                  "restart kimi ⏳", "<@U0BOT> bounce qwen :x:", "restart kimi 🕝",
                                  "<@U0BOT> ✋ restart qwen"])
def test_an_emoji_that_says_no_or_later_leaves_no_order(text: str) -> None:
    assert not _read(text)[2], text


@pytest.mark.parametrize("text", ["<@U0BOT> kimi's gone again :skull: restart it", "<@U0BOT> restart qwen :pray:",
                                  "<@U0BOT> :rotating_light: restart kimi"])
def test_an_emoji_between_sentences_parts_them_and_a_plea_is_still_an_order(text: str) -> None:
    assert _read(text)[2], text


def test_an_emoji_leaves_no_mark_in_the_plain_text() -> None:
    assert read("<@U0BOT> kimi :skull: restart it", "slack", BOT).plain.split() == ["kimi", "restart", "it"]


@pytest.mark.parametrize(("text", "services"), [
    ("kimi stuck at cuda graph capture for 40 min, bounce it", ["kimi"]),
    ("qwen's logs are full of nccl timeouts, restart it pls", ["qwen"]),
])
def test_a_statement_then_the_order_with_it_is_the_order(text: str, services: list[str]) -> None:
    _case(text, "restart", services, order=True)


def test_two_orders_the_second_with_it_keep_the_first() -> None:
    assert _read("restart qwen, then bench it")[0] == "restart"


@pytest.mark.parametrize(("text", "intent"), [
    ("is qwen locked", "unlock"), ("any locks on kimi?", "unlock"),
    ("the pager fired for qwen at 2am, what's it look like now", "status"),
    ("what does the log look like on qwen", "logs"),
])
def test_locks_asked_about_and_how_things_look(text: str, intent: str) -> None:
    got, _, order, _ = _read(text)
    assert got in (intent, "restarts") if intent == "unlock" else got == intent, text
    assert not order, text


def test_a_pasted_table_asks_nothing() -> None:
    text = ("<@U0BOT> +-----------------------------------------+\n"
            "| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |")
    r = route(read(text, "slack", BOT), CFG, ALIASES)
    assert not r.matched and r.unknown == []


@pytest.mark.parametrize("text", ["restart qwen, please don't", "bounce kimi, better not",
                                  "qwen neu starten, bitte nicht",
                                  "reinicia qwen, mejor no", "redémarre qwen, non", "重启 qwen，算了",
                                  "qwenを再起動、やっぱりやめて", "restart qwen, no rush"])
def test_a_take_back_after_a_comma_leaves_no_order(text: str) -> None:
    assert not _read(text)[2], text


@pytest.mark.parametrize("text", ["restart kimi, not qwen", "qwen is not responding, restart it",
                                  "qwen hung -> restart", "kimi wedged => bounce it"])
def test_a_negation_elsewhere_and_an_arrow_keep_the_order(text: str) -> None:
    assert _read(text)[2], text


@pytest.mark.parametrize(("text", "nodes", "services"), [
    ("gpu-bb status", ["gpu-b"], []), ("logs on gpu-aa", ["gpu-a"], []), ("qwenn status", [], ["qwen"]),
])
def test_a_letter_typed_twice_is_still_the_name(text: str, nodes: list[str], services: list[str]) -> None:
    r = route(read(text, "terminal"), CFG, ALIASES)
    assert (sorted(r.named_nodes), sorted(r.named_services), r.unknown) == (nodes, services, []), text


def test_lat_and_tput_are_throughput() -> None:
    assert _read("lat on kimi?")[0] == "throughput" and _read("qwen tput")[0] == "throughput"


@pytest.mark.parametrize("text", ["kimiは再起動しなくていい", "qwenは再起動しなくても大丈夫", "qwenの再起動は必要ない",
                                  "kimi 不用重启", "没必要重启 qwen"])
def test_no_need_to_restart_in_japanese_and_chinese_is_a_negation(text: str) -> None:
    intent, _, order, args = _read(text)
    assert (intent, order, args.get("negated")) == ("restarts", False, True), text


def test_a_setting_named_only_in_a_pasted_log_line_is_not_the_question() -> None:
    text = "<@U0BOT> INFO 12-05 04:40:00 [api_server.py:1024] Starting vLLM API server on http://0.0.0.0:8000\nkimi up?"
    _case(text, "status", ["kimi"])


def test_a_lock_said_to_be_stuck_is_about_the_lock_never_an_order() -> None:
    intent, services, order, _ = _read("qwen's restart lock is stuck since this morning")
    assert (intent in ("unlock", "restarts"), services, order) == (True, ["qwen"], False)


@pytest.mark.parametrize(("text", "intent"), [
    ("can the bot draw graphs in slack", "help"), ("is there a json output for status", "help"),
    ("give me an example of a throughput question", "help"), ("what did the bot do last night", "audit"),
])
def test_questions_about_the_bots_own_features(text: str, intent: str) -> None:
    assert _read(text)[0] == intent, text


def test_something_different_in_a_services_env_is_what_changed() -> None:
    _case("anything different in kimi's env since monday", "changes", ["kimi"])
    _case("something different in qwen's flags?", "changes", ["qwen"])


def test_the_kv_cache_block_is_the_block_size_flag() -> None:
    _case("how big is qwen's kv cache block", "flag", ["qwen"], flag="block-size")


def test_a_german_adverb_is_no_unknown_name() -> None:
    assert route(read("qwen startet immer wieder neu, warum?", "terminal"), CFG, ALIASES).unknown == []


@pytest.mark.parametrize("text", ["restart qwen... no, forget it", "bounce kimi. forget that"])
def test_forget_it_takes_an_order_back(text: str) -> None:
    assert not _read(text)[2], text


@pytest.mark.parametrize("text", ["restart qwen please, it's at 0 tok/s", "bounce kimi, it's stuck at 95%"])
def test_a_measure_after_at_is_no_time(text: str) -> None:
    assert _read(text)[2], text


@pytest.mark.parametrize(("text", "intent", "args"), [
    ("qwen's bench history", "chart_bench", {}), ("is qwen on int4 weights", "flag", {"flag": "quantization"}),
    ("how many req/s is qwen serving", "throughput", {}), ("qwen err log", "logs", {}),
])
def test_bench_history_weights_rates_and_err(text: str, intent: str, args: dict[str, object]) -> None:
    _case(text, intent, ["qwen"], **args)
    assert route(read(text, "terminal"), CFG, ALIASES).unknown == [], text


def test_a_short_alias_beside_another_is_no_unknown_name() -> None:
    assert route(read("what's qwen's tp and pp", "terminal"), CFG, ALIASES).unknown == []


@pytest.mark.parametrize(("text", "intent"), [("qwen envv", "settings"), ("kimi logss", "logs"),
                                             ("gpuss on qwen", "gpus")])
def test_a_short_command_word_with_a_letter_typed_twice(text: str, intent: str) -> None:
    assert _read(text)[0] == intent, text


def test_the_journals_options_after_logs_are_no_vllm_flags() -> None:
    _case("logs qwen --since 2h", "logs", ["qwen"])
    _case("what's qwen's --max-num-seqs", "flag", ["qwen"], flag="max-num-seqs")


@pytest.mark.parametrize(("text", "intent"), [
    ("who changed qwen's max model len", "changes"), ("what's qwen's max model len", "flag"),
    ("how is qwen launched", "settings"), ("how was kimi started", "settings"),
])
def test_who_changed_a_flag_and_how_a_service_is_launched(text: str, intent: str) -> None:
    assert _read(text)[0] == intent, text


def test_french_rien_is_no_unknown_name() -> None:
    assert route(read("ne redémarre rien ce soir", "terminal"), CFG, ALIASES).unknown == []


@pytest.mark.parametrize("text", ["restart qwen, assuming it's idle", "bounce kimi provided the eval is over",
                                  "restart qwen as long as nobody objects", "reinicia kimi, o mejor no",
                                  "等会儿重启 kimi", "restart qwen iff it hangs"])
def test_a_condition_or_a_later_in_other_words_leaves_no_order(text: str) -> None:
    assert not _read(text)[2], text


@pytest.mark.parametrize(("text", "intent"), [("welcome back bot", "smalltalk"), ("are you a bot?", "help")])
def test_greetings_and_what_the_bot_is(text: str, intent: str) -> None:
    assert _read(text)[0] == intent, text


def test_team_shorthand_is_no_unknown_name() -> None:
    for text in ("todo restart qwen", "qwen logs grep nccl"):
        assert route(read(text, "terminal"), CFG, ALIASES).unknown == [], text


@pytest.mark.parametrize("text", ["restart qwen in the event it hangs again", "bounce kimi should the load stall",
                                  "restart qwen subject to approval", "restart kimi, contingent on the eval",
                                  "restart qwen kinda", "bounce kimi, sort of", "restart qwen tmw",
                                  "restart kimi within the hour", "bounce qwen, on hold", "restart kimi tbd"])
def test_conditions_deadlines_and_half_meant_orders_leave_no_order(text: str) -> None:
    assert not _read(text)[2], text


def test_a_remark_after_an_order_keeps_it() -> None:
    assert _read("restart kimi, it should be quick")[2]


@pytest.mark.parametrize("text", ["worst case, bounce qwen", "in theory, restart kimi", "alternatively, restart qwen",
                                  "in 20 min, restart kimi", "可能要重启 qwen", "たぶん qwenを再起動"])
def test_a_time_or_a_maybe_before_the_order_leaves_no_order(text: str) -> None:
    assert not _read(text)[2], text


def test_a_length_in_the_statement_before_an_order_keeps_it() -> None:
    assert _read("qwen has been down for an hour, restart it")[2]


def test_stuck_in_a_loop_before_an_order_is_no_time() -> None:
    assert _read("qwen is stuck in a loop, restart it")[2]


@pytest.mark.parametrize(("text", "intent"), [("is it ok to restart qwen now", "restarts"),
                                              ("fine to restart kimi?", "restarts"), ("is qwen ok", "status")])
def test_ok_to_restart_asks_whether_one_may(text: str, intent: str) -> None:
    intent_got, _, order, _ = _read(text)
    assert (intent_got, order) == (intent, False), text


def test_an_emoji_to_the_bot_by_name_is_small_talk() -> None:
    assert _read("<@U0BOT> :wave: bot")[0] == "smalltalk"


def test_how_long_until_one_may_restart_is_about_restarts() -> None:
    assert _read("how long until we can restart qwen again")[0] == "restarts"
    assert _read("how long until qwen is ready")[0] == "status"


def test_spanish_nada_is_no_unknown_name() -> None:
    assert route(read("no reinicies nada hoy", "terminal"), CFG, ALIASES).unknown == []


def test_the_gpu_util_fraction_reserved_is_the_flag_and_an_eval_is_no_name() -> None:
    _case("what gpu util fraction does kimi reserve", "flag", ["kimi"], flag="gpu-memory-utilization")
    assert route(read("restart qwen, unless the eval's still running", "terminal"), CFG, ALIASES).unknown == []
