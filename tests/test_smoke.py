"""The smoke completion before ✅ (issue 14): the simulated node behind a real sshd, the real store and scheduler.

Every case restarts the Kimi unit through the guarded flow and checks the notices a person sees (one per
place), what went over SSH (the key never on a command line), and the store across a bot restart.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from handlers.notify import RecordingNotifier
from services.node.smoke import MARK, build_smoke_script, parse_smoke_output
from services.redact import Redactor
from services.sim.scenarios import KIMI_API_KEY, KIMI_UNIT
from tests.conftest import MakeCluster, SimCluster
from tests.test_follow import FlakyNotifier
from tests.test_restart import NOTIFY, OPS, THREAD, access, bot, kimi, notices, request, set_profile, until

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

READY_RE = re.compile(r"^✅ kimi on gpu-a is ready — loaded in \S+( \S+)?( \(last time [^)]+\))?, "
                      r"first token in \d+\.\d\d s$")
KEY_ENV = "INFERBOT_TEST_KIMI_KEY"


async def smoke_cluster(make_cluster: MakeCluster, *, key: bool = True, readiness: dict[str, Any] | None = None,
                        monkeypatch: pytest.MonkeyPatch | None = None) -> SimCluster:
    svc: dict[str, Any] = {"name": "kimi", "node": "gpu-a", "unit": KIMI_UNIT}
    if key:
        assert monkeypatch is not None
        monkeypatch.setenv(KEY_ENV, KIMI_API_KEY)
        svc["api_key_env"] = KEY_ENV
    if readiness is not None:
        svc["readiness"] = readiness
    cluster = await make_cluster({"gpu-a": kimi()}, services=[svc], access=access(cooldown="0s"),
                                 notify={"channel": NOTIFY},
                                 watch={"poll": "0.2s", "interval": "0.3s", "safety_interval": "0.3s",
                                        "max_load": "60s"})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    return cluster


def completions_sent(commands: list[str]) -> list[str]:
    return [c for c in commands if "/v1/completions" in c]


def final(b: Any, word: str) -> tuple[list[str], list[str]]:
    return notices(b, word, OPS, THREAD), notices(b, word, NOTIFY)


async def test_ready_notice_waits_for_the_completion_and_says_first_token(
        make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await smoke_cluster(make_cluster, monkeypatch=monkeypatch)
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(lambda: all(final(b, "is ready")), 45, "the ready notices")
        await asyncio.sleep(0.5)
        for texts in final(b, "is ready"):
            assert len(texts) == 1 and READY_RE.match(texts[0]), texts
        sent = completions_sent(b.commands)
        assert len(sent) == 1
        assert '"max_tokens": 1' in sent[0] and '"temperature": 0' in sent[0] and '"model": "kimi-k2.5"' in sent[0]
        assert all(KIMI_API_KEY not in c for c in b.commands)  # over stdin only
        load = await b.rt.store.loads.last("kimi", "gpu-a")  # type: ignore[union-attr]
        assert load is not None
        smoke = await b.rt.store.smoke_checks.get("kimi", "gpu-a", load.invocation_id)  # type: ignore[union-attr]
        assert smoke is not None and smoke.outcome == "ok" and smoke.ttft_s is not None


async def test_failing_completion_is_a_failure_with_vllms_error(
        make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await smoke_cluster(make_cluster, monkeypatch=monkeypatch)
    set_profile(cluster.sims["gpu-a"], completion_fail=True)
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(lambda: all(final(b, "failed")), 45, "the failure notices")
        await asyncio.sleep(0.5)
        for texts in final(b, "failed"):
            assert texts == ["❌ kimi on gpu-a failed — the smoke completion failed: HTTP 500 — "
                             "InternalServerError: CUDA error: an illegal memory access was encountered"], texts
        assert not any(final(b, "is ready"))
        req = await b.rt.store.requests.get(rid)  # type: ignore[union-attr]
        assert req is not None and req.state == "failed"
        load = await b.rt.store.loads.last("kimi", "gpu-a")  # type: ignore[union-attr]
        assert load is not None and load.outcome == "failed"


async def test_hanging_completion_times_out(make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await smoke_cluster(make_cluster, monkeypatch=monkeypatch, readiness={"smoke_timeout": "1s"})
    set_profile(cluster.sims["gpu-a"], completion_hang=True)
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(lambda: all(final(b, "failed")), 45, "the timeout notices")
        await asyncio.sleep(0.5)
        for texts in final(b, "failed"):
            assert texts == ["❌ kimi on gpu-a failed — the smoke completion timed out after 1 s"], texts


async def test_smoke_off_sends_no_completion(make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await smoke_cluster(make_cluster, monkeypatch=monkeypatch, readiness={"smoke": False})
    set_profile(cluster.sims["gpu-a"], completion_fail=True)  # would fail: it must not be asked
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(lambda: all(final(b, "is ready")), 45, "the ready notices")
        for texts in final(b, "is ready"):
            assert len(texts) == 1 and "first token" not in texts[0] and "smoke" not in texts[0], texts
        assert completions_sent(b.commands) == []


async def test_without_the_key_the_smoke_test_is_skipped_and_said(make_cluster: MakeCluster) -> None:
    cluster = await smoke_cluster(make_cluster, key=False)  # the unit runs with --api-key; the bot holds none
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(lambda: all(final(b, "is ready")), 45, "the ready notices")
        for texts in final(b, "is ready"):
            assert len(texts) == 1, texts
            assert texts[0].startswith("✅ kimi on gpu-a is ready — loaded in ")
            assert texts[0].endswith(", smoke test skipped: the server requires an API key and I hold none "
                                     "(set api_key_env)"), texts


async def test_bot_restart_between_completion_and_notice_posts_it_once(
        make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await smoke_cluster(make_cluster, monkeypatch=monkeypatch)
    # One notifier stands for the Slack both processes post to; it is down for the first one.
    down = FlakyNotifier(fail_word="is ready", failures=10_000)
    async with bot(cluster.config, notifier=down) as first:
        rid = await request(first)
        assert (await first.click("restart_confirm", rid)).executed
        await until(lambda: down.failures >= 2, 45, "a failed ready post")
        first_sent = completions_sent(first.commands)
        load = await first.rt.store.loads.last("kimi", "gpu-a")  # type: ignore[union-attr]
        assert load is not None and load.outcome == "ready"
        smoke = await first.rt.store.smoke_checks.get("kimi", "gpu-a", load.invocation_id)  # type: ignore[union-attr]
        assert smoke is not None and smoke.ttft_s is not None
        down_ttft = f"first token in {smoke.ttft_s:.2f} s"
    down.left = 0  # Slack is back
    shared = down
    async with bot(cluster.config, notifier=shared) as second:
        await until(lambda: len(notices_of(shared, "is ready")) >= 2, 30, "the ready notices from the second bot")
        await asyncio.sleep(0.5)
        assert len(notices_of_in(shared, OPS, THREAD)) == 1 and len(notices_of_in(shared, NOTIFY, None)) == 1
        for t in notices_of(shared, "is ready"):
            assert t.endswith(down_ttft), t  # the same completion, not a second one
        assert completions_sent(second.commands) == []
    assert len(first_sent) == 1


def notices_of(n: RecordingNotifier, word: str) -> list[str]:
    return [t for t in n.texts() if word in t]


def notices_of_in(n: RecordingNotifier, channel: str, thread: str | None) -> list[str]:
    return [p.text for p in n.posts if p.channel == channel and p.thread_ts == thread and "is ready" in p.text]


# ------------------------------------------------------------------------------------------------
# The template and the parser (pure)


def _out(rc: int, body: str, tail: str) -> str:
    import base64

    return f"{MARK} rc={rc}\n" + base64.b64encode(f"{body}\n{tail}".encode()).decode() + "\n"


def test_script_has_no_key_and_quotes_its_values() -> None:
    script = build_smoke_script("http://127.0.0.1:8000", "moonshotai/Kimi-K2.5", 30)
    assert "B='{\"model\": \"moonshotai/Kimi-K2.5\", \"prompt\": \"Hello\", \"max_tokens\": 1, \"temperature\": 0}'" \
        in script
    assert "IFS= read -r K" in script and "-H @-" in script
    with pytest.raises(ValueError):
        build_smoke_script("http://127.0.0.1:8000", "x'; rm -rf / #", 30)
    with pytest.raises(ValueError):
        build_smoke_script("http://h:1/$(id)", "m", 30)


@pytest.mark.parametrize(("stdout", "keyed", "outcome", "detail"), [
    (_out(0, '{"choices": [{"text": " hi"}]}', "200 0.412"), True, "ok", ""),
    (_out(0, '{"error": {"message": "boom", "type": "InternalServerError", "code": 500}}', "500 0.1"), True,
     "failed", "the smoke completion failed: HTTP 500 — InternalServerError: boom"),
    (_out(0, '{"object": "error", "message": "bad", "type": "BadRequestError", "code": 400}', "400 0.1"), True,
     "failed", "the smoke completion failed: HTTP 400 — BadRequestError: bad"),
    (_out(0, '{"error": "Unauthorized"}', "401 0.01"), False, "skipped",
     "the server requires an API key and I hold none (set api_key_env)"),
    (_out(0, '{"error": "Unauthorized"}', "401 0.01"), True, "failed",
     "the smoke completion failed: HTTP 401 — the server refused the API key I hold"),
    (_out(28, "", "000 30.0"), True, "failed", "the smoke completion timed out after 30 s"),
    (_out(7, "", "000 0.0"), True, "failed", "the smoke completion could not reach the server (connection refused)"),
    ("", True, "failed", "the smoke completion did not run on the node (no answer)"),
])
def test_parse(stdout: str, keyed: bool, outcome: str, detail: str) -> None:
    r = parse_smoke_output(stdout, keyed, 30, Redactor())
    assert (r.outcome, r.detail) == (outcome, detail)
    if outcome == "ok":
        assert r.ttft_s == pytest.approx(0.412)


def test_error_text_is_redacted() -> None:
    body = '{"error": {"message": "bad header Bearer ' + KIMI_API_KEY + '", "type": "BadRequestError"}}'
    r = parse_smoke_output(_out(0, body, "400 0.1"), True, 30, Redactor([KIMI_API_KEY]))
    assert KIMI_API_KEY not in r.detail and "[redacted]" in r.detail


async def test_failed_completion_notice_survives_a_bot_restart_with_vllms_error(
        make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await smoke_cluster(make_cluster, monkeypatch=monkeypatch)
    set_profile(cluster.sims["gpu-a"], completion_fail=True)
    slack = FlakyNotifier(fail_word="failed —", failures=10_000)  # down for the first process
    async with bot(cluster.config, notifier=slack) as first:
        rid = await request(first)
        assert (await first.click("restart_confirm", rid)).executed
        await until(lambda: slack.failures >= 2, 45, "a failed post of the ❌")
    slack.left = 0
    async with bot(cluster.config, notifier=slack) as second:
        await until(lambda: len([p for p in slack.posts if "failed —" in p.text]) >= 2, 30, "the ❌ notices")
        await asyncio.sleep(0.5)
        for channel, thread in ((OPS, THREAD), (NOTIFY, None)):
            posted = [p.text for p in slack.posts if p.channel == channel and p.thread_ts == thread
                      and "failed —" in p.text]
            assert posted == ["❌ kimi on gpu-a failed — the smoke completion failed: HTTP 500 — "
                              "InternalServerError: CUDA error: an illegal memory access was encountered"], posted
        assert completions_sent(second.commands) == []


async def test_key_variable_configured_but_unset_is_named(make_cluster: MakeCluster,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await smoke_cluster(make_cluster, monkeypatch=monkeypatch)
    monkeypatch.delenv(KEY_ENV)
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(lambda: bool(notices(b, "is ready", NOTIFY)), 45, "the ready notice")
        assert notices(b, "is ready", NOTIFY)[0].endswith(
            f", smoke test skipped: the server requires an API key and ${KEY_ENV} is not set for the bot")
