"""handlers/looks.py: one look at a time per load or node; who asks during a look gets the one after it."""

from __future__ import annotations

import asyncio

from handlers.looks import Coalesced


async def test_looks_asked_during_a_look_share_the_one_after_it() -> None:
    runs: list[int] = []
    release = asyncio.Event()

    async def look() -> int:
        runs.append(len(runs) + 1)
        n = len(runs)
        if n == 1:
            await release.wait()
        return n

    c = Coalesced()
    first = asyncio.create_task(c.run("watch:gpu-a", look))
    await asyncio.sleep(0)
    waiting = [asyncio.create_task(c.run("watch:gpu-a", look)) for _ in range(5)]
    await asyncio.sleep(0)
    release.set()
    results = await asyncio.gather(first, *waiting)
    # One look running when they asked, one look after it for all five: they see what it saw.
    assert runs == [1, 2] and results == [1, 2, 2, 2, 2, 2]
    assert await c.run("watch:gpu-a", look) == 3  # asked after: a look of its own


async def test_different_loads_and_nodes_do_not_wait_for_each_other() -> None:
    started: list[str] = []
    gate = asyncio.Event()

    async def look(key: str) -> str:
        started.append(key)
        await gate.wait()
        return key

    c = Coalesced()
    tasks = [asyncio.create_task(c.run(k, lambda k=k: look(k))) for k in ("follow:kimi@gpu-a", "watch:gpu-a")]
    await asyncio.sleep(0.01)
    assert sorted(started) == ["follow:kimi@gpu-a", "watch:gpu-a"]  # both running at once
    gate.set()
    assert await asyncio.gather(*tasks) == ["follow:kimi@gpu-a", "watch:gpu-a"]


async def test_a_look_that_fails_fails_for_its_caller_and_the_next_one_runs() -> None:
    calls = 0

    async def look() -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("the node went away")
        return calls

    c = Coalesced()
    try:
        await c.run("watch:gpu-a", look)
    except ConnectionError:
        pass
    else:
        raise AssertionError("the failure was swallowed")
    assert await c.run("watch:gpu-a", look) == 2


async def test_who_waited_for_a_look_that_failed_gets_a_look_of_their_own() -> None:
    gate = asyncio.Event()
    calls = 0

    async def look() -> int:
        nonlocal calls
        calls += 1
        if calls == 2:
            await gate.wait()
            raise ConnectionError("the node went away")
        return calls

    c = Coalesced()
    assert await c.run("watch:gpu-a", look) == 1
    failing = asyncio.create_task(c.run("watch:gpu-a", look))
    await asyncio.sleep(0)
    waiter = asyncio.create_task(c.run("watch:gpu-a", look))  # asked while the failing look runs
    await asyncio.sleep(0)
    gate.set()
    assert isinstance((await asyncio.gather(failing, return_exceptions=True))[0], ConnectionError)
    assert await waiter == 3  # not the first look's stale answer
