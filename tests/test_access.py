"""The restart access policy, as pure rules: who, where, groups, the default, per-service, two people."""

from __future__ import annotations

import pytest

from config.models import AccessPolicy, BotConfig, Node, Service
from handlers.context import Asker
from services.access import StaticGroups, check_restart_access, check_second_person
from services.mentions import plain

ALICE, BOB, EVE = "U0ALICE", "U0BOB", "U0EVE"
OPS, OTHER = "C0OPS", "C0RANDOM"
SRE = "S0SRE"


def slack(user: str | None, channel: str | None = OPS, groups: frozenset[str] = frozenset()) -> Asker:
    return Asker(surface="slack", user_id=user, channel_id=channel, usergroups=groups)


async def test_default_policy_allows_nobody_and_says_how() -> None:
    d = await check_restart_access(AccessPolicy(), slack(ALICE), StaticGroups({}))
    assert not d.allowed
    assert "nobody may restart" in d.reason
    assert d.how_to_allow is not None
    assert f'restart_users = ["{ALICE}"]' in d.how_to_allow and "[access]" in d.how_to_allow


async def test_listed_user_allowed_other_refused() -> None:
    policy = AccessPolicy(restart_users=[ALICE])
    assert (await check_restart_access(policy, slack(ALICE), StaticGroups({}))).allowed
    d = await check_restart_access(policy, slack(EVE), StaticGroups({}))
    assert not d.allowed and EVE in d.reason and EVE in (d.how_to_allow or "")


async def test_group_membership_via_lookup() -> None:
    policy = AccessPolicy(restart_usergroups=[SRE])
    groups = StaticGroups({SRE: [BOB]})
    assert (await check_restart_access(policy, slack(BOB), groups)).allowed
    assert not (await check_restart_access(policy, slack(EVE), groups)).allowed
    assert groups.calls == 2
    # Memberships the front end already knows need no lookup.
    known = StaticGroups({})
    assert (await check_restart_access(policy, slack(EVE, groups=frozenset({SRE})), known)).allowed
    assert known.calls == 0


async def test_channels_restrict_where_and_refuse_dms() -> None:
    policy = AccessPolicy(restart_users=[ALICE], restart_channels=[OPS])
    assert (await check_restart_access(policy, slack(ALICE, OPS), StaticGroups({}))).allowed
    d = await check_restart_access(policy, slack(ALICE, OTHER), StaticGroups({}))
    assert not d.allowed and f"<#{OTHER}>" in plain(d.reason) and f"<#{OPS}>" in plain(d.reason)
    dm = await check_restart_access(policy, slack(ALICE, "D0DM"), StaticGroups({}))
    assert not dm.allowed and "direct message" in dm.reason
    # No channel list: any channel, DMs included.
    open_policy = AccessPolicy(restart_users=[ALICE])
    assert (await check_restart_access(open_policy, slack(ALICE, "D0DM"), StaticGroups({}))).allowed


async def test_per_service_override() -> None:
    node = Node(name="gpu-a", host="127.0.0.1")
    kimi = Service(name="kimi", node="gpu-a", unit="vllm-kimi.service",
                   access=AccessPolicy(restart_users=[BOB]))
    qwen = Service(name="qwen", node="gpu-a", unit="vllm-qwen.service")
    config = BotConfig(nodes=[node], services=[kimi, qwen], access=AccessPolicy(restart_users=[ALICE]))
    assert (await check_restart_access(config.access_for(kimi), slack(BOB), StaticGroups({}))).allowed
    assert not (await check_restart_access(config.access_for(kimi), slack(ALICE), StaticGroups({}))).allowed
    assert (await check_restart_access(config.access_for(qwen), slack(ALICE), StaticGroups({}))).allowed
    assert not (await check_restart_access(config.access_for(qwen), slack(BOB), StaticGroups({}))).allowed


async def test_terminal_is_allowed_even_with_default_policy() -> None:
    d = await check_restart_access(AccessPolicy(), Asker(surface="cli"), StaticGroups({}))
    assert d.allowed


async def test_no_user_id_refused() -> None:
    policy = AccessPolicy(restart_users=[ALICE])
    assert not (await check_restart_access(policy, slack(None), StaticGroups({}))).allowed


@pytest.mark.parametrize(("second", "requester", "confirmer", "ok"), [
    (False, ALICE, ALICE, True),
    (True, ALICE, ALICE, False),
    (True, ALICE, BOB, True),
])
def test_two_person_rule(second: bool, requester: str, confirmer: str, ok: bool) -> None:
    policy = AccessPolicy(restart_users=[ALICE, BOB], require_second_person=second)
    d = check_second_person(policy, requester, confirmer)
    assert d.allowed is ok
    if not ok:
        assert "two-person rule" in d.reason
