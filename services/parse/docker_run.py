"""``docker run`` (and ``podman run``, ``docker container run``) read as the container tool reads it.

What inferbot wants of it: the environment it gives the container (``-e``, ``--env``, ``--env-file``), its
entrypoint, the image and the words after the image (the container's command, or arguments to the image's
own entrypoint). Options are skipped by how the tool parses them, so a value is never taken for the image.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CONTAINER_TOOLS = frozenset({"docker", "podman", "nvidia-docker"})
"""Programs read as a container tool when they ``run`` an image."""

_DOCKER_SHORT_VALUE = {
    "a": "attach", "c": "cpu-shares", "e": "env", "h": "hostname", "l": "label", "m": "memory",
    "p": "publish", "u": "user", "v": "volume", "w": "workdir",
}  # fmt: skip
_DOCKER_BOOL_LONG = frozenset({
    "rm", "detach", "interactive", "tty", "privileged", "init", "read-only", "publish-all", "no-healthcheck",
    "oom-kill-disable", "quiet", "sig-proxy", "disable-content-trust", "help", "env-host", "http-proxy",
    "replace", "rmi", "no-hosts", "tls-verify", "use-api-version",
})  # fmt: skip
# Any other long option is taken to have a value: true of nearly all of docker's and podman's.


@dataclass
class DockerRun:
    """What a ``docker run`` command line says about the container it starts."""

    env: dict[str, str] = field(default_factory=dict)  # -e NAME=VALUE (a bare -e NAME: VALUE "", in host_env)
    env_files: list[str] = field(default_factory=list)
    host_env: list[str] = field(default_factory=list)  # -e NAME: copied from the host's environment
    entrypoint: str | None = None
    image: str | None = None  # None: the options ran to the end, no image
    command: list[str] = field(default_factory=list)  # the words after the image

    def take(self, name: str, value: str) -> None:
        """Note one option (by its long name) that matters to inferbot; the others are skipped."""
        if name == "env":
            key, eq, val = value.partition("=")
            self.env[key] = val
            if not eq:
                self.host_env.append(key)
        elif name == "env-file":
            self.env_files.append(value)
        elif name == "entrypoint":
            self.entrypoint = value


def docker_run(argv: list[str]) -> DockerRun | None:
    """``argv`` read as ``docker run …`` / ``docker container run …``, or None when it is no such command."""
    if not argv or argv[0].rsplit("/", 1)[-1] not in CONTAINER_TOOLS:
        return None
    if argv[1:2] == ["run"]:
        start = 2
    elif argv[1:3] == ["container", "run"]:
        start = 3
    else:
        return None
    run = DockerRun()
    i = _skip_options(argv, start, run)
    if i < len(argv):
        run.image, run.command = argv[i], argv[i + 1 :]
    return run


def _skip_options(argv: list[str], i: int, run: DockerRun) -> int:
    """Read the options from ``argv[i]`` on into ``run``; the index of the image (``len(argv)``: none)."""
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            return i + 1
        if tok.startswith("--"):
            name, eq, value = tok[2:].partition("=")
            if name in _DOCKER_BOOL_LONG or eq:
                i += 1
            else:
                value = argv[i + 1] if i + 1 < len(argv) else ""
                i += 2
            if name not in _DOCKER_BOOL_LONG:
                run.take(name, value)
        elif tok.startswith("-") and len(tok) > 1:
            i += _short_options(argv, i, run)
        else:
            return i
    return i


def _short_options(argv: list[str], i: int, run: DockerRun) -> int:
    """Read the short option cluster ``argv[i]`` into ``run``; how many words it took (1, or 2 with a value)."""
    # A cluster like -it, -d, or a short option with its value glued on: -p8000:8000, -e=A=1.
    tok = argv[i]
    for j in range(1, len(tok)):
        long_name = _DOCKER_SHORT_VALUE.get(tok[j])
        if long_name is None:
            continue
        glued = tok[j + 1 :]
        glued = glued[1:] if glued.startswith("=") else glued
        if glued:
            run.take(long_name, glued)
            return 1
        run.take(long_name, argv[i + 1] if i + 1 < len(argv) else "")
        return 2
    return 1
