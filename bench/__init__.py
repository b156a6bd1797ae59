"""The benchmark: inferbot against OpenSSH and Ansible on simulated nodes, and on cheap nodes up to 1,024
(``python -m bench``).

Modules: ``cluster`` (the simulated nodes behind real sshd, a separate process), ``cheap`` (sshd that replay
a recorded answer of the simulated Kimi node, 16 addresses per sshd, a separate process), ``warm_client``
(the long-lived bot path, a separate process), ``watch_scale`` (the scheduler's watchers polling hundreds of
services), ``contenders/`` (how each contender is run and measured: one module per contender — ``inferbot``,
``openssh``, ``ansible_adhoc``, ``simulator`` — beside ``runs``, ``commands`` and ``processes``), ``nodecost``
(the probe's CPU and forks on a node), ``machine`` (what it ran on), ``report`` (goals, table, JSON and
Markdown; issue 26's goals in ``push_report`` and ``slack_report``), ``chart`` (wall time against N),
``readiness`` (notice latency), ``profile_client/`` (the bot's own cost per node, isolated: one module per mode,
``record``, ``pure``, ``ssh``, ``watch``), ``failover`` and ``redaction`` (their own benchmarks).
"""
