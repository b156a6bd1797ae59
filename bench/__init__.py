"""The benchmark: inferbot against OpenSSH and Ansible on 1 to 64 simulated nodes (``python -m bench``).

Modules: ``cluster`` (the simulated nodes behind real sshd, a separate process), ``warm_client`` (the
long-lived bot path, a separate process), ``contenders`` (how each contender is run and measured),
``machine`` (what it ran on), ``report`` (goals, table, JSON and Markdown), ``readiness`` (notice latency).
"""
