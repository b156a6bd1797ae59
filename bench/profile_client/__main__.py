"""``python -m bench.profile_client MODE …``: the command line of the bot's own cost per node (see the package)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import bench.profile_client as package
from bench.common import QUESTION
from bench.profile_client.pure import pure
from bench.profile_client.record import record
from bench.profile_client.recording import SAMPLES
from bench.profile_client.ssh import ssh
from bench.profile_client.watch import watch


def main() -> int:
    """Entry point of ``python -m bench.profile_client``."""
    p = argparse.ArgumentParser(prog="python -m bench.profile_client",
                                description=(package.__doc__ or "").splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--out", type=Path, required=True)
    q = sub.add_parser("pure")
    q.add_argument("--rec", type=Path, default=SAMPLES, help="recorded answers (default: the tests' samples)")
    q.add_argument("-n", type=int, default=64)
    q.add_argument("--runs", type=int, default=5)
    q.add_argument("--state", choices=("loading", "ready"), default="loading")
    q.add_argument("--render", action="store_true", help="also render text and the --json object")
    q.add_argument("--no-store", action="store_true")
    q.add_argument("--question", default=QUESTION)
    q.add_argument("--profile", type=Path)
    q.add_argument("--fresh-db", action="store_true", help="the measured process creates the state database")
    t = sub.add_parser("ssh")
    t.add_argument("--rec", type=Path, default=SAMPLES, help="recorded answers (default: the tests' samples)")
    t.add_argument("-n", type=int, default=64)
    t.add_argument("--runs", type=int, default=5)
    t.add_argument("--state", choices=("loading", "ready"), default="loading")
    t.add_argument("--question", default=QUESTION)
    t.add_argument("--profile", type=Path)
    t.add_argument("--tracemalloc", action="store_true", help="where the warm-up's memory went (slow)")
    t.add_argument("--fresh-db", action="store_true", help="the measured process creates the state database")
    t.add_argument("--keep-previous", action="store_true",
                   help="hold the previous answer while asking the next (bench/warm_client.py did before)")
    t.add_argument("--connect-first", action="store_true", help="open every connection before the first question")
    w = sub.add_parser("watch")
    w.add_argument("--rec", type=Path, default=SAMPLES, help="recorded answers (default: the tests' samples)")
    w.add_argument("-n", type=int, default=64)
    w.add_argument("--seconds", type=float, default=20.0)
    w.add_argument("--interval", type=float, default=2.0, help="the watcher's interval (the bot's is 15-60 s)")
    w.add_argument("--state", choices=("loading", "ready"), default="ready")
    w.add_argument("--ssh", action="store_true", help="real sshd answering with the recording")
    w.add_argument("--direct", type=int, default=0, help="call the job function this many times instead")
    w.add_argument("--profile", type=Path)
    w.add_argument("--no-traffic", action="store_true", help="keep the recording's token counters still")
    args = p.parse_args()
    result: dict[str, Any]
    if args.cmd == "record":
        args.out.mkdir(parents=True, exist_ok=True)
        result = asyncio.run(record(args.out))
    elif args.cmd == "pure":
        result = asyncio.run(pure(args.rec, args.n, args.runs, args.state, args.render, args.profile,
                                  not args.no_store, args.question, args.fresh_db))
    elif args.cmd == "ssh":
        result = asyncio.run(ssh(args.rec, args.n, args.runs, args.state, args.profile, args.question,
                                 args.tracemalloc, args.connect_first, args.fresh_db, args.keep_previous))
    elif args.cmd == "watch":
        result = asyncio.run(watch(args.rec, args.n, args.seconds, args.interval, args.state, args.ssh,
                                   args.direct, args.profile, not args.no_traffic and args.state == "ready"))
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
