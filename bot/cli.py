"""``inferbot`` on the command line: ask, demo, check, serve, restart."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from bot.app import runtime
from bot.dispatch import answer
from bot.logs import setup_logging
from bot.render_text import render_text
from config.loader import ConfigError, load_config
from config.models import BotConfig
from handlers.context import Asker
from handlers.reply import Reply
from services.redact import redact_patterns

EXIT_OK = 0
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad usage or config: one clear line on stderr, exit 2."""


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

    demo = sub.add_parser("demo", help="answer on a built-in simulated cluster (no config, Slack or GPU)")
    demo.add_argument("question", nargs="*", help='default: "what are current settings?"')
    demo.add_argument("--json", action="store_true", help="print one JSON object")

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
    return p


def emit(reply: Reply, as_json: bool) -> None:
    """Print a reply as text or as the ``--json`` object."""
    text = render_text(reply)
    if as_json:
        print(json.dumps(reply.to_json(text), ensure_ascii=False, indent=2))
    else:
        print(text, end="")


async def ask(config: BotConfig, question: str, as_json: bool) -> int:
    """Answer one question against ``config`` and print it."""
    async with runtime(config) as rt:
        reply = await answer(question, rt.context(Asker(surface="json" if as_json else "cli")))
    emit(reply, as_json)
    return EXIT_OK


def _load(path: str | None) -> BotConfig:
    try:
        return load_config(path)
    except ConfigError as e:
        # The message quotes the offending value, which may be a token pasted into the wrong key.
        raise UsageError(redact_patterns(str(e))) from None


async def _run(args: argparse.Namespace) -> int:
    if args.cmd == "ask":
        return await ask(_load(args.config), " ".join(args.question), args.json)
    if args.cmd == "demo":
        from bot.demo import run_demo

        question = " ".join(args.question) or "what are current settings?"
        return await run_demo(question, args.json)
    if args.cmd == "check":
        from bot.check import run_check

        return await run_check(_load(args.config), args.json)
    if args.cmd == "serve":
        from bot.slack_app import serve

        return await serve(_load(args.config), http=args.http, host=args.host, port=args.port)
    if args.cmd == "restart":
        from bot.restart_cli import run_restart

        return await run_restart(_load(args.config), args.service, force=args.force, wait=args.wait,
                                 confirm=args.yes)
    raise UsageError(f"unknown command {args.cmd}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``inferbot`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    setup_logging(os.environ.get("INFERBOT_LOG_LEVEL", "WARNING"))
    try:
        args = build_parser().parse_args(argv)
        return asyncio.run(_run(args))
    except UsageError as e:
        print(f"inferbot: {e}", file=sys.stderr)
        if as_json:
            print(json.dumps({"ok": False, "error": str(e)}))
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("inferbot: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
