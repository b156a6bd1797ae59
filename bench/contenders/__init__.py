"""How each contender answers the settings question, and what it costs the client (wall, CPU, RSS).

Every contender sends the same remote command to every node: inferbot's own probe for the settings
question (``services.node.probe.build_script`` with ``handlers.settings.SETTINGS_PROBE``, wrapped by
``remote_command``), built here from the same config the bot reads. The warm client reports a hash of what
the bot really sent, and the report checks that it matches.

Client CPU is measured, never estimated: ``os.wait4`` gives each finished child's user+sys time
(including its own waited-for children), and an OpenSSH multiplexing master, which detaches, is read
from ``/proc/PID/stat`` before and after each question.

One module per job: ``runs`` (what a run measured), ``commands`` (the commands the bot sends),
``processes`` (starting and reaping the contenders' processes), ``inferbot``, ``openssh``, ``ansible_adhoc``
and ``simulator`` (one contender each). The names below are what ``python -m bench`` and the other bench
modules use.
"""

from bench.contenders.ansible_adhoc import ANSIBLE_VENV, ansible_adhoc, ensure_ansible, write_ansible_files
from bench.contenders.commands import settings_commands, watch_commands
from bench.contenders.inferbot import compile_project, inferbot_cold, inferbot_warm, startup, watcher_at_scale
from bench.contenders.openssh import (
    close_masters,
    control_dir,
    key_exchanges,
    openssh_multiplexed,
    openssh_sequential,
    tree_memory_of,
)
from bench.contenders.processes import Done, Proc, reap, spawn
from bench.contenders.runs import END_MARK, Result, Run
from bench.contenders.simulator import simulator_cost

__all__ = [
    "ANSIBLE_VENV",
    "END_MARK",
    "Done",
    "Proc",
    "Result",
    "Run",
    "ansible_adhoc",
    "close_masters",
    "compile_project",
    "control_dir",
    "ensure_ansible",
    "inferbot_cold",
    "inferbot_warm",
    "key_exchanges",
    "openssh_multiplexed",
    "openssh_sequential",
    "reap",
    "settings_commands",
    "simulator_cost",
    "spawn",
    "startup",
    "tree_memory_of",
    "watch_commands",
    "watcher_at_scale",
    "write_ansible_files",
]
