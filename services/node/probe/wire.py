"""Reading what the probe printed: its sections, decoded and typed (``NodeRaw``), not yet interpreted.

The format is described in the package's docstring (``services/node/probe/__init__.py``).
"""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime

from pydantic import Field

from services.models import HttpProbe, Model

MARK = "@@inferbot@@"
WRAP = MARK + " b64 "  # the line that carries the base64 of every section
SESSION_DONE = b" done\n"


class ReadFile(Model):
    """A file read on the node (base64 on the wire); ``data`` is None when it could not be read."""

    path: str
    rc: int
    data: bytes | None = None


class MetricsScrape(Model):
    at: float
    probe: HttpProbe


class ProcRow(Model):
    """One process of a unit (from ``/proc/PID/stat``) and its argv when it could be read."""

    pid: int
    ppid: int
    comm: str = ""
    argv: list[str] | None = None


class UnitRaw(Model):
    """What the probe printed about one unit, decoded but not yet interpreted."""

    unit: str
    show_rc: int = 0
    show: str = ""
    cat_rc: int = 0
    cat: str = ""
    cmdline: ReadFile | None = None
    environ: ReadFile | None = None
    files: dict[str, ReadFile] = Field(default_factory=dict)
    url: str | None = None
    health: HttpProbe | None = None
    version: HttpProbe | None = None
    metrics: list[MetricsScrape] = Field(default_factory=list)
    models: HttpProbe | None = None
    models_keyed: bool = False  # /v1/models was asked with the bot's API key
    procs: list[ProcRow] = Field(default_factory=list)  # the unit's processes, main process included
    procs_src: str | None = None  # the cgroup.procs file read, "ppid" (descendants of MainPID), None: not asked
    child_environ: ReadFile | None = None  # environ of the first other process that looked like a server
    vargs: str | None = None  # vLLM's "non-default args: {…}" start-up line (holds secrets: redact)
    journal: str | None = None
    journal_src: str | None = None
    logs: str | None = None
    bench_dir: str | None = None
    bench_files: dict[str, str] = Field(default_factory=dict)


class NodeRaw(Model):
    """What the probe printed about one node."""

    now: datetime | None = None
    tz: str = "+0000"
    uid: int | None = None
    host: str = ""
    gpus_rc: int | None = None
    gpus: str = ""
    gpu_apps_rc: int | None = None
    gpu_apps: str = ""
    parents: dict[int, int] = Field(default_factory=dict)  # pid -> ppid
    units: list[UnitRaw] = Field(default_factory=list)
    discovered: list[str] | None = None
    complete: bool = False


def session_answer_end(data: bytes | bytearray) -> int | None:
    """Where the first answer of a persistent probe session ends in ``data`` (its ``done`` line cut off), or
    None while it is incomplete.

    The answer's own marker value is read from its first marker line (the node line, before any content),
    and the answer is complete when ``data`` ends with ``<marker><value> done``: content cannot hold that
    value, so no byte the node prints can end an answer early, and bytes after it (which the bot never
    asked for) leave it incomplete.
    """
    if not data.endswith(SESSION_DONE):
        return None
    mark = b"\n" + MARK.encode()
    first = data.find(mark)
    if first < 0:
        return None
    value_end = data.find(b" ", first + len(mark))
    if value_end < 0:
        return None
    value = data[first + len(mark) : value_end]
    if not value or b"\n" in value:
        return None
    done = mark + value + SESSION_DONE
    if not data.endswith(done) or len(data) - len(done) <= first:
        return None
    return len(data) - len(done) + 1  # the answer keeps its own last newline


_KV = re.compile(r"(\w+)=(\S*)")


def _kv(rest: str) -> dict[str, str]:
    return dict(_KV.findall(rest))


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text.strip(), validate=False)
    except ValueError:
        return b""


def _int(value: str | None, default: int = 0) -> int:
    try:
        return int(value) if value not in (None, "") else default
    except ValueError:
        return default


def _http(url: str, rc: int, body_and_code: str) -> HttpProbe:
    body, _, code = body_and_code.rpartition("\n")
    status = _int(code.strip(), 0) or None
    return HttpProbe(url=url, status=status, curl_exit=rc, body=body)


def _txt(data: bytes) -> str:
    """A section captured by ``$(...)`` on the node before: decoded, trailing newlines dropped."""
    return data.decode("utf-8", "replace").rstrip("\n")


def _streams(stdout: str) -> list[bytes]:
    """The sections' bytes: what came plain, then the base64 line decoded (a script run piecewise, as tests
    do, has no base64 line: all of it is plain)."""
    text = stdout if stdout.startswith("\n") else "\n" + stdout  # every marker then follows a newline
    at = text.rfind("\n" + WRAP)  # the last: plain text before it cannot end the plain part early
    if at < 0:
        return [text.encode("utf-8", "surrogateescape")]
    end = text.find("\n", at + 1)
    blob = text[at + 1 + len(WRAP) : end if end > 0 else len(text)]
    data = _b64(blob)
    return [text[:at].encode("utf-8", "surrogateescape"), data if data.startswith(b"\n") else b"\n" + data]


def _transfers(data: bytes) -> list[tuple[str, str, str, bytes]]:
    """``(code, exitcode, url, body)`` of each curl transfer in ``data``, in the order curl made them.

    Each transfer wrote its body, then ``\nCODE EXITCODE SIZE URL\n``; walking from the end, SIZE says where
    a body starts, so nothing inside a body is ever read as a ``-w`` line. Stops where the shape breaks.
    """
    out: list[tuple[str, str, str, bytes]] = []
    rest = data
    while rest.endswith(b"\n"):
        cut = rest.rfind(b"\n", 0, len(rest) - 1)
        fields = rest[cut + 1 : -1].decode("utf-8", "replace").split(" ", 3)
        if cut < 0 or len(fields) != 4 or not fields[2].isdigit() or int(fields[2]) > cut:
            break
        start = cut - int(fields[2])
        out.append((fields[0], fields[1], fields[3], rest[start:cut]))
        rest = rest[:start]
    out.reverse()
    return out


_PATHS = {"metrics": "/metrics", "version": "/version", "models": "/v1/models"}


def _attach_http(unit: UnitRaw, kv: dict[str, str], data: bytes, rc: int) -> None:
    """The ``http`` section: the transfers of one curl, each known by its URL."""
    names = kv.get("get", "").split()
    got = _transfers(data)
    if not got and names and rc != 0:
        got = [("", "", f"{unit.url}{_PATHS.get(names[0], '')}", b"")]  # curl made none (not installed, killed)
    for i, (code, exit_code, url, body) in enumerate(got):
        if exit_code.isdigit():
            curl_exit = int(exit_code)
        elif code and code != "000":
            curl_exit = 0  # curl before 7.75 writes no per-transfer exit code: an answer means it went through
        else:
            curl_exit = rc if i == len(got) - 1 else rc or 1  # the last one's is curl's own exit status
        probe = HttpProbe(url=url, status=_int(code, 0) or None, curl_exit=curl_exit,
                          body=body.decode("utf-8", "replace"))
        if url == f"{unit.url}/version":
            unit.version = probe
        elif url == f"{unit.url}/v1/models":
            unit.models, unit.models_keyed = probe, kv.get("key", "1") == "1"
        elif url == f"{unit.url}/metrics":
            unit.metrics.append(MetricsScrape(at=float(kv.get("t", "0") or 0), probe=probe))


_ARGV_HEADER = re.compile(rb"(?:^|\n)==> /proc/(\d+)/cmdline <==\n")


def _attach_argvs(unit: UnitRaw, data: bytes) -> None:
    """Split ``head``'s output (``==> /proc/PID/cmdline <==`` before each file) onto ``unit.procs``.

    Headers are taken in the order of the processes asked for, so an argv that happens to contain a
    header line can at worst cut its own text short, never be read as another PID's.
    """
    by_pid = {p.pid: p for p in unit.procs}
    marks = [(m.start(), m.end(), int(m.group(1))) for m in _ARGV_HEADER.finditer(data)]
    order = [p.pid for p in unit.procs]
    pos = {pid: i for i, pid in enumerate(order)}
    picked: list[tuple[int, int, int]] = []
    last = -1
    for start, end, pid in marks:
        if pid in pos and pos[pid] > last:
            picked.append((start, end, pid))
            last = pos[pid]
    for i, (_start, end, pid) in enumerate(picked):
        stop = picked[i + 1][0] if i + 1 < len(picked) else len(data)
        by_pid[pid].argv = split_nul(data[end:stop])


def _attach_read(unit: UnitRaw, name: str, kv: dict[str, str], content: bytes, rc: int) -> None:
    """A section whose exit status followed it (an ``rc`` section): the unit file, one curl's transfers, a
    file's bytes (base64 when it came through ``sudo -n base64``)."""
    if name == "cat":
        unit.cat_rc, unit.cat = rc, _txt(content)
        return
    if name == "http":
        _attach_http(unit, kv, content, rc)
        return
    body = _b64(content.decode("ascii", "replace")) if kv.get("b64") == "1" else content
    read = ReadFile(path=kv.get("path", ""), rc=rc, data=body if rc == 0 else None)
    if name == "file":
        unit.files[read.path] = read
    elif name == "cmdline":
        unit.cmdline = read
    elif name == "cenviron":
        unit.child_environ = read
    else:
        unit.environ = read


def _attach(unit: UnitRaw, head: str, rest: str, kv: dict[str, str], content: bytes) -> None:
    """A section of ``unit`` that is complete in itself."""
    if head == "show":
        unit.show_rc, unit.show = _int(kv.get("rc")), _txt(content)
    elif head == "procs":
        unit.procs_src = kv.get("src") or None
        for row in content.decode("utf-8", "replace").split("\n"):
            cols = row.split(" ", 2)
            if len(cols) >= 2 and cols[0].isdigit() and cols[1].isdigit():
                comm = cols[2] if len(cols) > 2 else ""
                unit.procs.append(ProcRow(pid=int(cols[0]), ppid=int(cols[1]), comm=comm))
    elif head == "argvs":
        _attach_argvs(unit, content)
    elif head == "journal":
        unit.journal, unit.journal_src = content.decode("utf-8", "replace"), kv.get("src")
    elif head == "vargs":
        unit.vargs = content.decode("utf-8", "replace") or None
    elif head == "url":
        unit.url = rest.strip()
    elif head == "health":
        unit.health = HttpProbe(url=f"{unit.url}/health", status=_int(kv.get("code"), 0) or None,
                                curl_exit=_int(kv.get("rc")))
    elif head == "metrics":
        probe = _http(f"{unit.url}/metrics", _int(kv.get("rc")), content.decode("utf-8", "replace"))
        unit.metrics.append(MetricsScrape(at=float(kv.get("t", "0") or 0), probe=probe))
    elif head == "logs":
        unit.logs = content.decode("utf-8", "replace")
    elif head == "bench":
        unit.bench_dir = kv.get("dir")
    elif head == "benchfile":
        unit.bench_files[kv["path"]] = _txt(content)


def _head_values(head: str, rest: str) -> dict[str, str]:
    """A section head's ``key=value`` words; a path or a list of names is everything after its key."""
    kv = _kv(rest)
    if head in ("file", "cmdline", "environ", "cenviron", "benchfile"):
        kv["path"] = rest.partition("path=")[2]  # paths may contain spaces
    elif head == "http":
        kv["get"] = rest.partition("get=")[2]
    return kv


_NODE_SECTIONS = frozenset(("node", "gpus", "gpu-apps", "ps", "unit", "discovered", "end"))
# The sections whose exit status follows their content in an "rc" section.
_WITH_STATUS = frozenset(("cat", "http", "file", "cmdline", "environ", "cenviron"))


class _Reader:
    """Takes the sections of one answer in order into ``node``."""

    def __init__(self, node: NodeRaw) -> None:
        self.node = node
        self.unit: UnitRaw | None = None
        self.by_name: dict[str, UnitRaw] = {}
        # A section waiting for its "rc": its name, its key=values, its bytes.
        self.pending: tuple[str, dict[str, str], bytes] | None = None

    def take(self, part: bytes) -> None:
        """One section: its head line (name and ``key=value`` words), then its bytes."""
        head_bytes, _, content = part.partition(b"\n")
        head, _, rest = head_bytes.decode("utf-8", "replace").partition(" ")
        if head == "rc":
            self.finish(_int(rest.strip(), 1))
            return
        if self.pending is not None:
            self.finish(1)  # cut short before its status
        kv = _head_values(head, rest)
        if head in _NODE_SECTIONS:
            self.node_section(head, rest, kv, content)
        elif self.unit is None:
            return
        elif head in _WITH_STATUS:
            self.pending = (head, kv, content)
        else:
            _attach(self.unit, head, rest, kv, content)

    def finish(self, rc: int) -> None:
        """The pending section ends with exit status ``rc``."""
        if self.pending is not None and self.unit is not None:
            name, kv, content = self.pending
            _attach_read(self.unit, name, kv, content, rc)
        self.pending = None

    def node_section(self, head: str, rest: str, kv: dict[str, str], content: bytes) -> None:
        """A section about the node, or the start of a unit's sections."""
        node = self.node
        if head == "node":
            if kv.get("now", "").isdigit():
                node.now = datetime.fromtimestamp(int(kv["now"]), UTC)
            node.tz = kv.get("tz") or "+0000"
            node.uid = _int(kv.get("uid"), -1)
            node.host = kv.get("host", "")
        elif head == "gpus":
            node.gpus_rc, node.gpus = _int(kv.get("rc")), _txt(content)
        elif head == "gpu-apps":
            node.gpu_apps_rc, node.gpu_apps = _int(kv.get("rc")), _txt(content)
        elif head == "ps":
            for row in content.decode("ascii", "replace").split("\n"):
                parts = row.split()
                if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                    node.parents[int(parts[0])] = int(parts[1])
        elif head == "unit":
            self.enter(rest.strip())
        elif head == "discovered":
            node.discovered = rest.split()
        else:  # "end"
            node.complete = True

    def enter(self, name: str) -> None:
        """The sections that follow are ``name``'s (each stream names its unit; an empty name: none)."""
        if not name:
            self.unit = None
        elif name in self.by_name:
            self.unit = self.by_name[name]
        else:
            self.unit = self.by_name[name] = UnitRaw(unit=name)
            self.node.units.append(self.unit)


def parse_output(stdout: str) -> NodeRaw:
    """Split the probe's output into typed, decoded sections."""
    node = NodeRaw()
    streams = _streams(stdout)
    mark = b"\n" + MARK.encode()
    first = next((d for d in streams if d.startswith(mark)), None)
    if first is None:
        return node
    eol = first.find(b"\n", 1)
    nonce = first[len(mark) : eol if eol > 0 else len(first)].split(b" ", 1)[0]
    reader = _Reader(node)
    for stream in streams:
        reader.take(b"unit ")  # each stream starts outside any unit
        for part in stream.split(mark + nonce + b" ")[1:]:
            reader.take(part)
    reader.finish(1)  # a section still waiting for its status was cut short
    return node


def split_nul(data: bytes) -> list[str]:
    """``/proc/PID/cmdline`` bytes to argv (NUL separated; trailing NULs dropped)."""
    parts = data.decode("utf-8", "replace").split("\0")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def environ_dict(data: bytes) -> dict[str, str]:
    """``/proc/PID/environ`` bytes to a dict."""
    env: dict[str, str] = {}
    for item in split_nul(data):
        name, sep, value = item.partition("=")
        if sep and name:
            env[name] = value
    return env
