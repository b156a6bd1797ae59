"""The bot's own cost per node, isolated: recorded probe answers, pure client path and real SSH.

    python -m bench.profile_client record --out DIR               # what a simulated Kimi node answers
    python -m bench.profile_client pure -n 512 --runs 3            # parse → assemble → redact → handler → Reply
    python -m bench.profile_client ssh -n 512 --runs 3 [--connect-first]   # real sshd, pooled connections
    python -m bench.profile_client watch --direct 300              # one watcher poll after another, no SSH
    python -m bench.profile_client watch -n 64 --interval 2 --seconds 20 [--ssh]   # the scheduler's watchers

``record`` starts one simulated Kimi node behind a real sshd and saves what the settings question's probe and
the watcher's probe print (loading, and ready with traffic); by default the other modes use the copies in
``tests/samples/probe`` (``--rec DIR`` for others: re-record when the probe's wire format changes). ``pure``
replaces the pool by one that hands back the recording (no SSH at all) and asks the whole question through
``bot.dispatch.answer``: what is left is the client's own work per node. ``ssh`` starts sshds on loopback
addresses (16 per sshd) that answer every session with ``cat`` of the recording, so the SSH layer (handshake
once, then one channel per question) is measured too; the state database is created beforehand by another
process, as a restarted serving bot finds it. ``watch`` runs the watcher's job (``bot.jobs.watch_node_job``),
directly or from a real ``BotScheduler``, with token counters that move on every poll. Each prints one JSON
object; ``--profile FILE`` writes a cProfile of the measured part. CPU is this process's user+sys (getrusage,
every thread), so it is meaningful on a busy machine where wall time is not.

One module per mode (``record``, ``pure``, ``ssh``, ``watch``), beside what they share: ``recording`` (the
recorded answers), ``bot_setup`` (the measured bot's config, state database and front end), ``cheap_nodes``
(sshds that answer with a recording) and ``measuring`` (this process's CPU and memory); ``__main__`` reads the
command line.
"""
