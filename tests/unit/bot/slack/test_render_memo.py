"""bot/slack/render_memo.py: copies of one shared answer posted at once are drawn once, then let go."""

from __future__ import annotations

from bot.shared_answers import _copy
from bot.slack.render_memo import RenderMemo
from handlers.reply import Reply, Section


def reply() -> Reply:
    return Reply(intent="status", title="Status", sections=[Section(kind="text", text="kimi is ready")])


def test_copies_posted_at_once_share_the_drawing_and_it_goes_with_the_last() -> None:
    memo = RenderMemo()
    first = reply()
    with memo.messages(first) as a, memo.messages(_copy(first)) as b:
        assert a is b and memo.renders == 1
    with memo.messages(_copy(first)) as c:  # nothing was being posted any more: drawn again
        assert c is not a and memo.renders == 2


def test_a_reply_with_a_section_of_its_own_or_an_equal_one_made_apart_is_drawn_apart() -> None:
    memo = RenderMemo()
    first = reply()
    own = _copy(first)
    own.sections.insert(0, Section(kind="text", text="Did you want me to restart kimi?"))
    with memo.messages(first) as a, memo.messages(own) as b, memo.messages(reply()) as c:
        assert a is not b and a is not c and memo.renders == 3
        assert "restart" in b[0].text and "restart" not in a[0].text
