"""The node probe: one fixed POSIX-sh script per question per node, and the parser of what it prints.

The script is packaged shell and awk (``*.sh``, ``*.awk`` in this folder: the sections, with the names and
comments to read them by), which ``script.py`` assembles with the question's settings and the units'
validated values (``options.py``: what can be asked); ``wire.py`` reads the answer. No text from a chat
message ever reaches the script.

What it prints (the wire format): sections, each opened by a marker line ``\\n@@inferbot@@<N> <name> <k=v…>\\n``
where ``<N>`` is a random value the node reads when the probe starts and never puts on a command line: no
byte on the node can forge a marker, so contents need no escaping. First come, as they are, the sections
that are always UTF-8 (the node line, ``systemctl show``, ``nvidia-smi``, the GPU processes' ancestry);
then one line ``@@inferbot@@ b64 <base64>`` (one ``base64`` process) holding every section whose bytes may be
anything (files, argv with their NULs, the journal, HTTP bodies); then a plain ``@@inferbot@@ end``. Each
stream names the unit its sections belong to. A section whose exit status is known only after its content
streamed is followed by an ``rc <status>`` marker. HTTP bodies fetched by one curl for several URLs are cut
by the byte counts curl writes after each (``-w``), from the end.

The names the rest of the service layer uses are importable from here.
"""

from services.node.probe.options import (
    BENCH_KEYS,
    JOURNAL_FILTER,
    METRICS_FILTER,
    METRICS_READ_FILTER,
    SHOW_PROPERTIES,
    ProbeOptions,
    ProbeTarget,
)
from services.node.probe.script import (
    build_script,
    probe_command,
    remote_command,
    session_command,
    stdin_for,
)
from services.node.probe.wire import (
    MARK,
    MetricsScrape,
    NodeRaw,
    ProcRow,
    ReadFile,
    UnitRaw,
    environ_dict,
    parse_output,
    session_answer_end,
    split_nul,
)

__all__ = [
    "BENCH_KEYS",
    "JOURNAL_FILTER",
    "MARK",
    "METRICS_FILTER",
    "METRICS_READ_FILTER",
    "SHOW_PROPERTIES",
    "MetricsScrape",
    "NodeRaw",
    "ProbeOptions",
    "ProbeTarget",
    "ProcRow",
    "ReadFile",
    "UnitRaw",
    "build_script",
    "environ_dict",
    "parse_output",
    "probe_command",
    "remote_command",
    "session_answer_end",
    "session_command",
    "split_nul",
    "stdin_for",
]
