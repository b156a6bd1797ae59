"""``inferbot`` on the command line: ask, demo, check, serve, restart, change, revert."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import importlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from bot.errors import UsageError
from services.store.errors import DatabaseUrlError, SchemaError

if TYPE_CHECKING:
    from config.models import BotConfig

# Only argparse at import time: `inferbot --help` and a usage error must not pay for what a command
# uses (asyncio, pydantic, asyncssh, SQLAlchemy, Slack). Each command imports its own front end below.

EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 141  # as a shell reports a command ended by SIGPIPE (128 + 13)

FRONT_ENDS = {"ask": "bot.ask_once", "demo": "bot.demo", "check": "bot.check", "serve": "bot.slack.serve",
              "restart": "bot.restart_cli", "change": "bot.change_cli", "revert": "bot.change_cli"}
"""The module each command runs (imported only for that command; ``_run`` imports from it)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `inferbot --help`)")


def build_parser() -> argparse.ArgumentParser:
    """The CLI's flags (a contract: extend, never rename)."""
    p = _Parser(prog="inferbot", description="Chat-ops for vLLM inference clusters.")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    ask = sub.add_parser("ask", help="answer a question about the cluster")
    ask.add_argument("question", nargs="+", help='e.g. "what are current settings?"')
    ask.add_argument("--config", help="config file (default: $INFERBOT_CONFIG or ./inferbot.toml)")
    ask.add_argument("--json", action="store_true", help="print one JSON object")
    ask.add_argument("--png", metavar="FILE", help="write the answer's chart (e.g. `chart throughput kimi`) here")

    demo = sub.add_parser("demo", help="answer on a built-in simulated cluster (no config, Slack or GPU)")
    demo.add_argument("question", nargs="*", help='default: "what are current settings?"')
    demo.add_argument("--json", action="store_true", help="print one JSON object")
    demo.add_argument("--png", metavar="FILE", help="write the answer's chart here")

    check = sub.add_parser("check", help="validate the config and reach every node")
    check.add_argument("--config")
    check.add_argument("--json", action="store_true")

    serve = sub.add_parser("serve", help="run the Slack bot (Socket Mode by default)")
    serve.add_argument("--config")
    serve.add_argument("--http", action="store_true", help="Events API over HTTP instead of Socket Mode")
    serve.add_argument("--port", type=int, default=int(os.environ.get("PORT", "3000")))
    serve.add_argument("--host", default="0.0.0.0")

    restart = sub.add_parser("restart", help="restart a service (asks you to type its name back)")
    restart.add_argument("service")
    restart.add_argument("--config")
    restart.add_argument("--force", action="store_true", help="skip the cooldown (recorded as forced)")
    restart.add_argument("--wait", action="store_true", help="follow the load until ready or failed")
    restart.add_argument("--yes", metavar="SERVICE", help="confirm non-interactively by naming the service")
    restart.add_argument("--clear-lock", action="store_true",
                         help="show and clear a stale in-flight restart lock of SERVICE (audited); restarts nothing")

    change = sub.add_parser("change", help="change a service's flags or environment (a preflight and a preview, then "
                                           "you type its name back; kept when it loads and stays healthy, else "
                                           "rolled back)")
    change.add_argument("service", help="SERVICE (every node it runs on, one after the other) or SERVICE@NODE")
    change.add_argument("--config")
    change.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", dest="set_",
                        help="set a vLLM flag (a switch: --set enforce-eager, --set no-enforce-eager)")
    change.add_argument("--unset", action="append", default=[], metavar="NAME", help="remove a vLLM flag")
    change.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="set an environment variable")
    change.add_argument("--unset-env", action="append", default=[], metavar="NAME",
                        help="remove an environment variable")
    change.add_argument("--wait", action="store_true", help="return once the change is kept (exit 0) or rolled back")
    change.add_argument("--yes", metavar="SERVICE", help="confirm non-interactively by naming the service")

    revert = sub.add_parser("revert", help="back to the operator's unit: remove inferbot's settings drop-in "
                                           "(guarded like a change)")
    revert.add_argument("service")
    revert.add_argument("--config")
    revert.add_argument("--wait", action="store_true", help="return once the revert is kept (exit 0) or rolled back")
    revert.add_argument("--yes", metavar="SERVICE", help="confirm non-interactively by naming the service")
    return p


def _load(path: str | None) -> BotConfig:
    from config.loader import ConfigError, load_config
    from services.redact import redact_patterns

    try:
        config = load_config(path)
    except ConfigError as e:
        # The message quotes the offending value, which may be a token pasted into the wrong key.
        raise UsageError(redact_patterns(str(e)), e.example) from None
    problem = state_dir_problem(config)
    if problem:
        raise UsageError(problem)
    return config


def state_dir_problem(config: BotConfig) -> str | None:
    """Why the state directory can't hold the database (one line naming ``[state] dir`` and the fix), or None.

    Checked before any command runs, so a bad directory is exit 2 with one line, not a traceback from
    SQLite halfway through an answer. A configured directory must exist (a typo must not silently start
    an empty database, losing locks and history); the default one is created on first use.
    """
    url = config.state.database_url()
    if not url.startswith("sqlite:///") or url.endswith(":memory:"):
        return None  # another database (PostgreSQL): its own errors are clear enough
    db = Path(url.removeprefix("sqlite:///"))
    d = db.parent
    configured = config.state.dir is not None or bool(config.state.url)
    setting = "[state] url" if config.state.url else "[state] dir"
    if config.state.url:
        key = f"the directory {d} of the [state] url database"
    else:
        key = f"[state] dir {d}" if configured else f"the default state directory {d} ([state] dir)"
    if d.exists() and not d.is_dir():
        return f"{key} is a file, not a directory — set {setting} to a directory the bot may write"
    if not d.exists():
        if configured:
            return f"{key} does not exist — create it (mkdir -p {d}) or set {setting} to an existing directory"
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            return f"{key} cannot be created: {e.strerror} — set {setting} to a directory the bot may write"
    from config.local_file import regular_file_problem

    # SQLite would wait forever reading a FIFO put where the database goes.
    not_a_file = regular_file_problem(str(db), sys.maxsize)
    if not_a_file:
        return f"the state database {db} {not_a_file} — move it away or set {setting} to another directory"
    import tempfile

    try:
        # A real write, not os.access(): root passes access() checks a read-only mount still refuses.
        with tempfile.TemporaryFile(dir=d):
            pass
        if db.exists():
            with db.open("r+b"):
                pass
    except OSError as e:
        what = f"{db} is" if db.exists() and e.filename == str(db) else f"{key} is"
        return (f"{what} not writable ({e.strerror}) — let the bot's user write it "
                f"(chown/chmod) or set {setting} to a directory it may write")
    return None


async def _run(args: argparse.Namespace, config: BotConfig | None) -> int:
    if args.cmd == "demo":
        from bot.demo import run_demo

        question = " ".join(args.question) or "what are current settings?"
        return await run_demo(question, args.json, png=args.png)
    if config is None:
        raise UsageError(f"{args.cmd} needs a config")
    if args.cmd == "ask":
        from bot.ask_once import ask

        return await ask(config, " ".join(args.question), args.json, png=args.png)
    if args.cmd == "check":
        from bot.check import run_check

        return await run_check(config, args.json)
    if args.cmd == "serve":
        from bot.slack.serve import serve

        return await serve(config, http=args.http, host=args.host, port=args.port)
    if args.cmd == "restart":
        from bot.restart_cli import run_restart

        return await run_restart(config, args.service, force=args.force, wait=args.wait,
                                 confirm=args.yes, clear=args.clear_lock)
    if args.cmd in ("change", "revert"):
        from bot.change_cli import run_change

        change = args.cmd == "change"
        return await run_change(config, args.service, args.cmd, sets=args.set_ if change else None,
                                unsets=args.unset if change else None, envs=args.env if change else None,
                                unset_envs=args.unset_env if change else None, wait=args.wait, confirm=args.yes)
    raise UsageError(f"unknown command {args.cmd}")


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: for the imports of a command, which only build what lives until
    the process ends (modules, classes, pydantic schemas), so every collection they trigger would walk a
    growing heap and free nothing. What they built is frozen on the way out (moved where collections never
    look): otherwise the first allocation after re-enabling the collector walks all of it at once, before the
    nodes are even asked."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def _loader_cache_lookups() -> Iterator[None]:
    """``ctypes.util.find_library`` answered from the dynamic loader's cache only, inside.

    For the imports of a command: asyncssh looks for optional C libraries at import (liboqs, nettle), and on
    Linux each name the loader's cache lacks falls through to compiling and linking an empty program (three
    processes, gcc, collect2 and ld, for each; liboqs is looked for under two names). A name found that way is
    loaded by its soname, which the loader resolves from the same cache and directories, so a library the
    cache lacks is not loadable by name either; with ``LD_LIBRARY_PATH`` set the full lookup is kept (it
    searches there).
    """
    import ctypes.util

    from_cache = getattr(ctypes.util, "_findSoname_ldconfig", None)
    if from_cache is None or not sys.platform.startswith("linux") or os.environ.get("LD_LIBRARY_PATH"):
        yield
        return
    full = ctypes.util.find_library
    ctypes.util.find_library = from_cache
    try:
        yield
    finally:
        ctypes.util.find_library = full


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``inferbot`` command; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    try:
        args = build_parser().parse_args(argv)
        with _gc_paused(), _loader_cache_lookups():
            import asyncio

            from bot.logs import setup_logging

            importlib.import_module(FRONT_ENDS[args.cmd])
        setup_logging(os.environ.get("INFERBOT_LOG_LEVEL", "WARNING"))
        # Before the event loop: reading the config (and checking the state directory) is file I/O.
        config = None if args.cmd == "demo" else _load(args.config)
        return asyncio.run(_run(args, config))
    except (UsageError, DatabaseUrlError, SchemaError) as e:  # one line, exit 2 (state store included)
        from bot.terminal import shown

        example = e.example if isinstance(e, UsageError) else None
        print(shown(f"inferbot: {e}"), file=sys.stderr)  # it may quote a node, the config or a database
        if example:
            print(f"\n{example}", end="", file=sys.stderr)
        if as_json:
            import json

            print(json.dumps({"ok": False, "error": str(e), **({"example": example} if example else {})}))
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("inferbot: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`inferbot ask … | head`): nothing left to say and nobody to say it to. Standard
        # output is pointed at /dev/null so the interpreter's last flush does not fail again on the way out.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE


def _end_after_exit_handlers(status: list[int]) -> None:
    """The last exit handler: flush the standard streams and end the process, skipping the teardown.

    What remains of an interpreter's exit after its exit handlers is taking apart every module and object
    one by one, work for nobody in a process whose connections, store and files were closed by then. A
    failed flush, or no status (``main`` raised), leaves the exit to the interpreter.
    """
    if not status:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return  # reported (and the exit status set) by the interpreter, as it would be
    os._exit(status[0])


def entry() -> None:
    """The ``inferbot`` console script: :func:`main`, then exit without walking the heap once more.

    Everything was closed by then (connections, the store, temporary files); freezing the objects
    left spares the interpreter's last garbage collection, a walk of the whole heap that frees nothing a
    process about to end still needs. Its normal
    shutdown (non-daemon threads joined, every exit handler run, the streams flushed) still runs, and
    then the process ends without taking the interpreter apart (:func:`_end_after_exit_handlers`).
    """
    status: list[int] = []
    # Exit handlers run last in, first out: registered before any other (none from site or a sitecustomize,
    # such as coverage's), it runs after all of them; otherwise the interpreter's exit stays as it is.
    if atexit._ncallbacks() == 0:
        atexit.register(_end_after_exit_handlers, status)
    status.append(main())
    gc.freeze()
    sys.exit(status[0])


if __name__ == "__main__":
    entry()
