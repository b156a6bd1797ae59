"""Pydantic models of the cluster and the bot, as written in ``inferbot.toml``."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from config.duration import Duration

# Every pattern ends in \Z, not $: "$" also matches before a trailing newline, so "kimi\n" would pass.
NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,62})\Z")
# systemd unit names: letters, digits, ":-_.\@" (systemd.unit(5)); we only manage services. A leading "-"
# is refused: on a command line it would read as an option.
UNIT_RE = re.compile(r"^[A-Za-z0-9:_.\\][A-Za-z0-9:_.\\-]*(@[A-Za-z0-9:_.\\-]*)?\.service\Z")
HOST_RE = re.compile(r"^[A-Za-z0-9.:\[\]][A-Za-z0-9.:\-\[\]]*\Z")
USER_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}\Z")
SLACK_USER_RE = re.compile(r"^[UW][A-Z0-9]{2,}\Z")
SLACK_GROUP_RE = re.compile(r"^S[A-Z0-9]{2,}\Z")
SLACK_CHANNEL_RE = re.compile(r"^[CGD][A-Z0-9]{2,}\Z")
SLACK_TEAM_RE = re.compile(r"^[TE][A-Z0-9]{2,}\Z")
API_URL_RE = re.compile(r"^https?://[A-Za-z0-9.\-\[\]:]+(:\d{1,5})?(/[A-Za-z0-9._~/\-]*)?\Z")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
PATH_RE = re.compile(r"^[A-Za-z0-9._/~@+][A-Za-z0-9._/~@+\-]*\Z")


def _name(v: str) -> str:
    if not NAME_RE.match(v):
        raise ValueError(f"{v!r}: use lower-case letters, digits and dashes (e.g. 'gpu-a')")
    return v


def _unit(v: str) -> str:
    if v.startswith("-"):
        raise ValueError(f"{v!r} starts with '-', which a command line would read as an option")
    if not UNIT_RE.match(v):
        raise ValueError(f"{v!r} is not a systemd service name (e.g. 'vllm-kimi.service')")
    return v


def _remote_path(v: str) -> str:
    # These paths are put into the fixed remote script, so only a conservative character set passes.
    if not PATH_RE.match(v) or ".." in v.split("/"):
        raise ValueError(f"{v!r}: a path may only use letters, digits and . _ / ~ @ + -")
    return v


Name = Annotated[str, AfterValidator(_name)]
UnitName = Annotated[str, AfterValidator(_unit)]
RemotePath = Annotated[str, AfterValidator(_remote_path)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AccessPolicy(_Strict):
    """Who may restart what, and how carefully."""

    restart_users: list[str] = Field(default_factory=list)
    restart_usergroups: list[str] = Field(default_factory=list)
    restart_channels: list[str] = Field(default_factory=list)
    require_second_person: bool = False
    confirm_ttl: Duration = 120.0
    cooldown: Duration = 600.0
    restart_command: str = "sudo -n systemctl restart -- {unit}"
    # Run before the restart when the unit changed on disk without daemon-reload (fixed text, no placeholder).
    reload_command: str = "sudo -n systemctl daemon-reload"

    @field_validator("restart_users")
    @classmethod
    def _users(cls, v: list[str]) -> list[str]:
        for u in v:
            if not SLACK_USER_RE.match(u):
                raise ValueError(f"{u!r} is not a Slack user id (like 'U01ABCDEF'); display names are not used")
        return v

    @field_validator("restart_usergroups")
    @classmethod
    def _groups(cls, v: list[str]) -> list[str]:
        for g in v:
            if not SLACK_GROUP_RE.match(g):
                raise ValueError(f"{g!r} is not a Slack user-group id (like 'S01ABCDEF')")
        return v

    @field_validator("restart_channels")
    @classmethod
    def _channels(cls, v: list[str]) -> list[str]:
        for c in v:
            if not SLACK_CHANNEL_RE.match(c):
                raise ValueError(f"{c!r} is not a Slack channel id (like 'C01ABCDEF')")
        return v

    @field_validator("restart_command")
    @classmethod
    def _command(cls, v: str) -> str:
        # The template may only reference {unit}; everything else is fixed text from the operator.
        stripped = v.replace("{unit}", "")
        if "{" in stripped or "}" in stripped:
            raise ValueError("restart_command may only contain the placeholder {unit}")
        if "{unit}" not in v:
            raise ValueError("restart_command must contain {unit}")
        if any(c in v for c in "\n\r`$;&|<>"):
            raise ValueError("restart_command must be one plain command (no ; & | $ ` < > or newlines)")
        return v

    @field_validator("reload_command")
    @classmethod
    def _reload(cls, v: str) -> str:
        # Fixed text from the operator: no placeholder at all, one plain command.
        if "{" in v or "}" in v:
            raise ValueError("reload_command takes no placeholders (it reloads systemd, not one unit)")
        if not v.strip() or any(c in v for c in "\n\r`$;&|<>\"'\\"):
            raise ValueError("reload_command must be one plain command (no quotes, ; & | $ ` < > or newlines)")
        return v


class Node(_Strict):
    """A GPU host reached over SSH."""

    name: Name
    host: str
    port: int = Field(default=22, ge=1, le=65535)
    user: str = "root"
    key_file: str | None = None
    known_hosts: str = "~/.ssh/known_hosts"
    timeout: Duration = 10.0

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        if not HOST_RE.match(v):
            raise ValueError(f"{v!r} is not a host name or IP address")
        return v

    @field_validator("user")
    @classmethod
    def _user(cls, v: str) -> str:
        if not USER_RE.match(v):
            raise ValueError(f"{v!r} is not a Unix user name")
        return v


class ReadinessSettings(_Strict):
    """``[services.readiness]``: what must hold before a load is announced ready (issue 14)."""

    smoke: bool = True  # one tiny completion from the node before the ✅
    smoke_timeout: Duration = Field(default=30.0, gt=0, le=600)


class AcceptanceSettings(_Strict):
    """``[services.acceptance]``: an opt-in benchmark after each ✅ (and ``bench kimi`` on demand)."""

    bench: bool = False
    peak_concurrency: int = Field(default=64, ge=2, le=512)  # the second level; the first is always 1
    regression_pct: float = Field(default=5.0, gt=0, le=100)
    vllm: RemotePath | None = None  # the vllm executable on the node; default: the running server's own
    timeout: Duration = Field(default=900.0, gt=0, le=7200)


# A flag name (``max-num-seqs``) or an env name (``NCCL_PROTO``) in an allow/deny list; ``*`` and ``?`` match as in
# shell patterns (``speculative-*``, ``NCCL_*``).
FLAG_PATTERN_RE = re.compile(r"^[a-z0-9*?][a-z0-9*?.-]*\Z")
ENV_PATTERN_RE = re.compile(r"^[A-Za-z_*?][A-Za-z0-9_*?]*\Z")
DROPIN_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@+-]*\.conf\Z")


def _flag_pattern(v: str) -> str:
    name = v.strip().lstrip("-").replace("_", "-").lower()
    if not FLAG_PATTERN_RE.match(name):
        raise ValueError(f"{v!r} is not a vLLM flag name or pattern (like 'max-num-seqs' or 'speculative-*')")
    return name


def _env_pattern(v: str) -> str:
    if not ENV_PATTERN_RE.match(v):
        raise ValueError(f"{v!r} is not an environment variable name or pattern (like 'NCCL_PROTO' or 'NCCL_*')")
    return v


FlagPattern = Annotated[str, AfterValidator(_flag_pattern)]
EnvPattern = Annotated[str, AfterValidator(_env_pattern)]


class ChangeSettings(_Strict):
    """``[services.changes]``: settings changes from a channel (issue 25), off unless enabled."""

    enabled: bool = False
    allow_flags: list[FlagPattern] = Field(default_factory=list)  # empty: every flag but deny_flags
    deny_flags: list[FlagPattern] = Field(default_factory=list)
    allow_env: list[EnvPattern] = Field(default_factory=list)  # empty: every name but deny_env
    deny_env: list[EnvPattern] = Field(default_factory=list)
    verify_window: Duration = Field(default=600.0, gt=0, le=86400)
    rollback: bool = True
    max_parallel: int = Field(default=1, ge=1, le=64)
    # inferbot's own drop-in: default /etc/systemd/system/<unit>.d/90-inferbot.conf
    dropin: RemotePath | None = None

    @field_validator("dropin")
    @classmethod
    def _dropin(cls, v: str | None) -> str | None:
        if v is None:
            return v
        name = v.rsplit("/", 1)[-1]
        if not v.startswith("/") or not DROPIN_NAME_RE.match(name):
            raise ValueError(f"{v!r}: the drop-in is an absolute path to a file whose name ends in .conf "
                             "(e.g. '/etc/systemd/system/vllm-kimi.service.d/90-inferbot.conf')")
        return v


class Service(_Strict):
    """A vLLM server run by one systemd unit on one node."""

    name: Name
    node: Name
    unit: UnitName
    api_url: str | None = None
    api_key_env: str | None = None
    log_file: RemotePath | None = None
    bench_dir: RemotePath | None = None
    access: AccessPolicy | None = None
    readiness: ReadinessSettings = Field(default_factory=ReadinessSettings)
    acceptance: AcceptanceSettings = Field(default_factory=AcceptanceSettings)
    changes: ChangeSettings = Field(default_factory=ChangeSettings)

    @field_validator("api_key_env")
    @classmethod
    def _api_key_env(cls, v: str | None) -> str | None:
        if v is not None and not ENV_NAME_RE.match(v):
            raise ValueError(f"{v!r} is not an environment variable name (like 'KIMI_API_KEY')")
        return v

    @field_validator("api_url")
    @classmethod
    def _api_url(cls, v: str | None) -> str | None:
        if v is not None and not API_URL_RE.match(v):
            raise ValueError(f"{v!r} is not an http(s) URL like 'http://127.0.0.1:8000'")
        return v.rstrip("/") if v else v

    @model_validator(mode="after")
    def _acceptance_needs_bench_dir(self) -> Service:
        if self.acceptance.bench and not self.bench_dir:
            raise ValueError("[services.acceptance] bench = true needs bench_dir (where --save-result writes)")
        return self

    @model_validator(mode="after")
    def _dropin_of_this_unit(self) -> Service:
        # systemd reads a unit's drop-ins only from a directory named after it: a path elsewhere would be
        # written and never applied, and could only ever be someone else's file.
        path = self.changes.dropin
        if path is not None and path.rsplit("/", 2)[-2] != f"{self.unit}.d":
            raise ValueError(f"[services.changes] dropin = {path!r} is not in the unit's drop-in directory: it must "
                             f"be '<dir>/{self.unit}.d/NAME.conf' (default /etc/systemd/system/{self.unit}.d/"
                             "90-inferbot.conf)")
        return self

    def dropin_path(self) -> str:
        """Where inferbot's own drop-in for this unit lives (``[services.changes] dropin`` or the default)."""
        return self.changes.dropin or f"/etc/systemd/system/{self.unit}.d/90-inferbot.conf"


class SlackSettings(_Strict):
    """Non-secret Slack settings; tokens come only from the environment."""

    api_url: str = "https://slack.com/api/"
    rate_limit_per_minute: int = Field(default=10, ge=1)
    # Workspaces (T…) or Enterprise Grid orgs (E…) whose people are answered; empty: the app's own
    # workspace, as auth.test says. Everyone else (Slack Connect, other workspaces of an org) gets one line.
    allowed_teams: list[str] = Field(default_factory=list)

    @field_validator("allowed_teams")
    @classmethod
    def _teams(cls, v: list[str]) -> list[str]:
        for t in v:
            if not SLACK_TEAM_RE.match(t):
                raise ValueError(f"{t!r} is not a Slack workspace id (like 'T01ABCDEF') or org id (like 'E01ABCDEF')")
        return v


def _channel(v: str | None) -> str | None:
    if v is not None and not SLACK_CHANNEL_RE.match(v):
        raise ValueError(f"{v!r} is not a Slack channel id (like 'C01ABCDEF')")
    return v


ChannelId = Annotated[str | None, AfterValidator(_channel)]


class NotifySettings(_Strict):
    channel: ChannelId = None


class AuditSettings(_Strict):
    channel: ChannelId = None


class WatchSettings(_Strict):
    interval: Duration = 60.0
    poll: Duration = 15.0
    max_load: Duration = 3600.0
    enabled: bool = True
    hung_after: Duration = 300.0  # requests running or waiting and no new tokens this long: "possibly hung"
    unhealthy_polls: int = Field(default=2, ge=1, le=20)  # looks in a row with /health failing before ⚠️
    # Issue 26: the scheduler leader follows each node's journal (one `journalctl --follow` per node) and looks
    # at once when a line says something happened; the watcher then polls a node whose stream is up only every
    # `safety_interval` (never more often than `interval`), the safety net that also decides when a stream is
    # silent. `push = false`: the polls alone, as before.
    push: bool = True
    safety_interval: Duration = 120.0


class UnderstandingSettings(_Strict):
    """``[understanding]``: the optional help of the cluster's own model (issue 23, point 9). Off unless
    ``model`` names a configured service."""

    # A configured service whose model classifies a message the rules cannot place (its name, as in
    # [[services]]); None: never asked.
    model: Name | None = None
    # The model's answer must arrive within this (on the node, and the whole detour in the bot): a person waits
    # for it, so it can be lowered but only raised to a small cap.
    timeout: Duration = Field(default=1.0, gt=0, le=5.0)


class StateSettings(_Strict):
    dir: str | None = None
    url: str | None = None

    def database_url(self) -> str:
        """SQLAlchemy URL of the state database (SQLite in the state directory by default)."""
        if self.url:
            return self.url
        return f"sqlite:///{self.directory() / 'inferbot.sqlite3'}"

    def directory(self) -> Path:
        """The state directory, ``$XDG_STATE_HOME/inferbot`` unless configured."""
        if self.dir:
            return Path(os.path.expanduser(self.dir))
        base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
        return Path(base) / "inferbot"


class BotConfig(_Strict):
    """The whole configuration."""

    nodes: list[Node] = Field(default_factory=list)
    services: list[Service] = Field(default_factory=list)
    access: AccessPolicy = Field(default_factory=AccessPolicy)
    slack: SlackSettings = Field(default_factory=SlackSettings)
    notify: NotifySettings = Field(default_factory=NotifySettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)
    watch: WatchSettings = Field(default_factory=WatchSettings)
    state: StateSettings = Field(default_factory=StateSettings)
    understanding: UnderstandingSettings = Field(default_factory=UnderstandingSettings)
    source: str | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _references(self) -> BotConfig:
        node_names = [n.name for n in self.nodes]
        dup = {n for n in node_names if node_names.count(n) > 1}
        if dup:
            raise ValueError(f"node name(s) {sorted(dup)} appear more than once in [[nodes]]")
        for s in self.services:
            if s.node not in node_names:
                raise ValueError(
                    f"service {s.name!r} names node {s.node!r}, which is not in [[nodes]] "
                    f"(known: {', '.join(node_names) or 'none'})"
                )
        keys = [(s.name, s.node) for s in self.services]
        if len(set(keys)) != len(keys):
            raise ValueError("the same service name appears twice on one node")
        helper = self.understanding.model
        if helper is not None and helper not in {s.name for s in self.services}:
            raise ValueError(f"[understanding] model = {helper!r} is not a service in [[services]] (known: "
                             f"{', '.join(sorted({s.name for s in self.services})) or 'none'})")
        return self

    def node(self, name: str) -> Node:
        """The node called ``name``."""
        at = self._index.node.get(name)
        if at is not None:
            return self.nodes[at]
        raise KeyError(name)

    def service(self, name: str, node: str) -> Service | None:
        """The service called ``name`` on ``node``, if configured."""
        at = self._index.service.get((name, node))
        return self.services[at] if at is not None else None

    def services_on(self, node: str) -> list[Service]:
        """The services configured on ``node``, in the config's order."""
        return [self.services[at] for at in self._index.on_node.get(node, ())]

    @property
    def _index(self) -> _Index:
        # The watcher looks up its node and services every poll of every node: a scan of the lists was
        # O(fleet) per poll. Built once per pair of lists (a model_copy with new lists gets its own).
        ix: _Index | None = self.__dict__.get("_lookup")
        if ix is None or ix.nodes is not self.nodes or ix.services is not self.services or ix.sizes != (
                len(self.nodes), len(self.services)):
            ix = _Index(self.nodes, self.services)
            self.__dict__["_lookup"] = ix  # not a field: pydantic's equality, hash and dumps ignore it
        return ix

    def access_for(self, service: Service | None) -> AccessPolicy:
        """The access policy for a service: its own ``[services.access]`` or the global one."""
        if service is not None and service.access is not None:
            return service.access
        return self.access


class _Index:
    """Positions of the nodes by name and of the services by (name, node) and by node (first one wins, as
    the scans did)."""

    def __init__(self, nodes: list[Node], services: list[Service]) -> None:
        self.nodes, self.services, self.sizes = nodes, services, (len(nodes), len(services))
        self.node: dict[str, int] = {}
        for i, n in enumerate(nodes):
            self.node.setdefault(n.name, i)
        self.service: dict[tuple[str, str], int] = {}
        self.on_node: dict[str, list[int]] = {}
        for i, s in enumerate(services):
            self.service.setdefault((s.name, s.node), i)
            self.on_node.setdefault(s.node, []).append(i)


Mode = Literal["socket", "http"]
