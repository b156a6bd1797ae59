"""Block Kit rendering: limits respected, long answers split, nothing cut, buttons kept exactly."""

from __future__ import annotations

import json

from conftest import all_text

from bot.slack.blocks import (
    MAX_BLOCKS,
    MAX_CONTEXT_ELEMENT,
    MAX_FIELD,
    MAX_FIELDS,
    MAX_HEADER,
    MAX_MESSAGE_CHARS,
    MAX_SECTION_TEXT,
    escape,
    render_blocks,
    render_messages,
)
from handlers.reply import Action, Attachment, Reply, Section


def assert_within_limits(messages) -> None:
    for m in messages:
        dicts = m.block_dicts()
        assert 0 < len(dicts) <= MAX_BLOCKS
        assert len(json.dumps(dicts, ensure_ascii=False)) <= MAX_MESSAGE_CHARS
        assert m.text
        for d in dicts:
            if d["type"] == "section":
                assert len(d.get("text", {}).get("text", "")) <= MAX_SECTION_TEXT
                assert len(d.get("fields", [])) <= MAX_FIELDS
                assert all(len(f["text"]) <= MAX_FIELD for f in d.get("fields", []))
                if "```" in d.get("text", {}).get("text", ""):
                    assert d["text"]["text"].count("```") % 2 == 0  # every part is a complete code block
            if d["type"] == "header":
                assert len(d["text"]["text"]) <= MAX_HEADER
            if d["type"] == "context":
                assert all(len(e["text"]) <= MAX_CONTEXT_ELEMENT for e in d["elements"])


def test_settings_card_shape() -> None:
    reply = Reply(intent="settings", title="Current settings", status="loading", sections=[
        Section(kind="header", title="kimi on gpu-a", status="loading"),
        Section(kind="text", text="active, loading — started 13 min ago, ~17 min remaining"),
        Section(kind="fields", fields=[("model", "moonshotai/Kimi-K2.5"), ("vLLM", "0.11.0")]),
        Section(kind="table", title="Flags — parallelism", headers=["flag", "value"],
                rows=[["--tensor-parallel-size", "8"]]),
        Section(kind="table", title="Environment", headers=["variable", "value"],
                rows=[["NCCL_P2P_LEVEL", "NVL"], ["HF_TOKEN", "[redacted]"]]),
        Section(kind="context", title="Warnings", text="⚠ unit changed on disk but not reloaded"),
        Section(kind="divider"),
    ], actions=[Action(action_id="restart_confirm", text="Restart kimi", value="kimi|gpu-a|42", style="danger"),
                Action(action_id="restart_cancel", text="Cancel", value="kimi")])
    [msg] = render_messages(reply)
    d = msg.block_dicts()
    assert [b["type"] for b in d] == ["header", "header", "section", "section", "section", "section", "context",
                                      "divider", "actions"]
    assert d[0]["text"]["text"] == "⏳ Current settings"
    assert d[1]["text"]["text"] == "⏳ kimi on gpu-a"
    assert d[3]["fields"][0]["text"] == "*model*\nmoonshotai/Kimi-K2.5"
    assert "```" in d[4]["text"]["text"] and "--tensor-parallel-size" in d[4]["text"]["text"]
    assert "NCCL_P2P_LEVEL" in d[5]["text"]["text"] and "[redacted]" in d[5]["text"]["text"]
    assert "unit changed on disk" in d[6]["elements"][0]["text"]
    buttons = d[8]["elements"]
    assert [(b["action_id"], b["value"], b.get("style")) for b in buttons] == [
        ("restart_confirm", "kimi|gpu-a|42", "danger"), ("restart_cancel", "kimi", None)]
    assert "Current settings" in msg.text and "--tensor-parallel-size" in msg.text  # fallback text
    assert render_blocks(reply) == [msg.blocks]


def test_status_emoji() -> None:
    for status, emoji in [("ok", "✅"), ("loading", "⏳"), ("warn", "⚠️"), ("error", "❌"), ("info", "ℹ️")]:
        [msg] = render_messages(Reply(intent="x", title="t", status=status))  # type: ignore[arg-type]
        assert msg.block_dicts()[0]["text"]["text"] == f"{emoji} t"


def test_mrkdwn_is_escaped() -> None:
    [msg] = render_messages(Reply(intent="x", title="t", sections=[
        Section(kind="text", text="a <b> & c <!channel>"),
        Section(kind="table", headers=["k"], rows=[["x```y"]])]))
    d = msg.block_dicts()
    assert d[1]["text"]["text"] == "a &lt;b&gt; &amp; c &lt;!channel&gt;"
    assert "x```y" not in d[2]["text"]["text"]


def test_huge_table_splits_at_line_boundaries_into_complete_code_blocks() -> None:
    rows = [[f"--flag-{i}", "v" * 50 + f"-{i}"] for i in range(400)]
    table = Section(kind="table", title="Flags", headers=["flag", "value"], rows=rows)
    reply = Reply(intent="settings", title="t", sections=[table])
    messages = render_messages(reply)
    assert len(messages) > 1
    assert_within_limits(messages)
    text = "\n".join(all_text(m.block_dicts()) for m in messages)
    for i in range(400):
        assert f"--flag-{i} " in text and f"-{i}\n" in text
    sections = [b for m in messages for b in m.block_dicts() if b["type"] == "section"]
    assert len(sections) > 8
    assert all("flag" in s["text"]["text"].split("```")[1].splitlines()[1] for s in sections)  # headings repeated
    assert "(continued)" in sections[1]["text"]["text"]
    assert "part 2 of" in messages[1].text
    fallback = "\n".join(m.text for m in messages)
    assert all(f"--flag-{i} " in fallback for i in range(400))


def test_many_services_split_across_messages_nothing_lost() -> None:
    sections = []
    for i in range(30):
        sections += [Section(kind="header", title=f"svc{i}", status="ok"),
                     Section(kind="fields", fields=[(f"k{j}", f"val-{i}-{j}") for j in range(23)]),
                     Section(kind="context", text=f"warn-{i}")]
    messages = render_messages(Reply(intent="status", title="Status", sections=sections))
    assert_within_limits(messages)
    assert len(messages) > 1
    text = "\n".join(all_text(m.block_dicts()) for m in messages)
    for i in range(30):
        assert f"warn-{i}" in text
        assert all(f"val-{i}-{j}" in text for j in range(23))


def test_long_field_text_and_header_are_not_cut() -> None:
    long_value = "word " * 900  # 4500 characters: too long for a field and for one section
    long_title = "a very long service name " * 10
    messages = render_messages(Reply(intent="x", title=long_title, sections=[
        Section(kind="fields", fields=[("short", "1"), ("command line", long_value)]),
        Section(kind="text", text="\n".join(["x" * 100] * 70)),
        Section(kind="context", title="Warnings", text="\n".join(["w" * 300] * 20)),
        Section(kind="code", title="cmdline", text="y" * 7000)]))
    assert_within_limits(messages)
    dicts = [b for m in messages for b in m.block_dicts()]
    text = all_text(dicts)
    assert text.count("word") == 900
    assert text.count("w" * 300) == 20
    assert text.replace("\n", "").count("y" * 7000) == 1 or text.count("y") >= 7000
    assert long_title.strip() in text.replace("\n", " ")


def test_attachments_render_as_code_when_included() -> None:
    reply = Reply(intent="logs", title="logs", attachments=[Attachment(filename="a.log", title="journal",
                                                                     content="l1\nl2")])
    assert "l1" in all_text(render_messages(reply)[0].block_dicts())
    assert "l1" not in all_text(render_messages(reply, attachments=False)[0].block_dicts())


def test_escape() -> None:
    assert escape("<&>") == "&lt;&amp;&gt;"


def test_the_front_end_renders_a_big_answer_once_and_lets_its_sections_go() -> None:
    """``consume=True`` (the Slack front end) gives the same messages as a plain render and leaves the reply's
    sections empty, so an answer's sections and its blocks are never all held at once."""

    def big() -> Reply:
        sections = []
        for i in range(60):
            sections += [Section(kind="header", title=f"kimi-{i} on gpu-{i}", status="ok"),
                         Section(kind="table", title="Flags — model", headers=["flag", "value"],
                                 rows=[[f"--flag-{k}", f"value-{i}-{k} — ✅"] for k in range(12)]),
                         Section(kind="text", title="Throughput", text=f"live {i} tok/s")]
        return Reply(intent="settings", title="Current settings", status="ok", sections=sections)

    plain = render_messages(big())
    reply = big()
    consumed = render_messages(reply, consume=True)
    assert len(plain) > 3
    assert [(m.blocks, m.text) for m in consumed] == [(m.blocks, m.text) for m in plain]
    assert reply.sections == []
    assert_within_limits(consumed)
    assert "✅" in consumed[0].text and "—" in consumed[-1].blocks[0]["elements"][0]["text"]


def test_every_block_fits_a_message_whatever_its_source() -> None:
    """Blocks whose JSON outweighs a message (a 12.7 KB warning, ten long fields, 25 buttons with long values,
    text of characters JSON escapes six-fold) are split or redrawn: within every limit, nothing lost."""
    warning = "⚠ the running server's flags differ: --chat-template (unset) → " + "{{ '<|im_start|>' }}" * 640
    quotes = '"' * 2900
    controls = "\x01" * 2900
    fields = [(f"fact{j}", f"{j}:" + "v" * 1980) for j in range(10)]
    actions = [Action(action_id=f"act_{i}", text=f"Button {i}", value=f"{i}:" + "k" * 1990) for i in range(25)]
    reply = Reply(intent="status", title="Status", sections=[
        Section(kind="context", title="Warnings", text=warning),
        Section(kind="fields", fields=fields),
        Section(kind="text", text=quotes),
        Section(kind="code", title="bytes", text=controls),
    ], actions=actions)
    messages = render_messages(reply)
    assert_within_limits(messages)
    dicts = [b for m in messages for b in m.block_dicts()]
    flat = all_text(dicts)
    assert escape(warning).replace("\n", "") in "".join(
        all_text([b]).replace("\n", "") for b in dicts if b["type"] == "context" and "continued (part" not in
        all_text([b]))
    assert all(f"{j}:" + "v" * 1980 in flat for j in range(10))
    assert flat.count('"') >= 2900 and flat.count("\x01") >= 2900
    values = [e["value"] for b in dicts if b["type"] == "actions" for e in b["elements"]]
    assert values == [a.value for a in actions]  # every button, its value whole
