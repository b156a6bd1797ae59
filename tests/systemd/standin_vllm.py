#!/usr/bin/python3
"""A stand-in vLLM API server for the real-systemd test tier (python3 stdlib only, runs inside the container).

It keeps the argv and environment it was started with (that is the point: the bot must read them), answers
``/health``, ``/version``, ``/v1/models`` (``root`` and ``max_model_len`` from its own argv) and ``/metrics``,
and logs to stdout (the journal) the startup lines vLLM logs, including ``non-default args: {...}`` with
every value in clear, secrets included. Lines listed in the file named by ``STANDIN_LOG_LINES`` are logged
too (the journal part of the secrets corpus). It works under any name: copy it anywhere.
"""

from __future__ import annotations

import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import standin_busy

VERSION = "0.20.1"
INT_FLAGS = {"port", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "max_num_seqs",
             "max_num_batched_tokens", "seed"}
FLOAT_FLAGS = {"gpu_memory_utilization"}
MULTI_FLAGS = {"api_key", "served_model_name"}


def parse(argv: list[str]) -> tuple[str, dict[str, object]]:
    """The model and the non-default args, roughly as vLLM's parser would resolve them."""
    if "serve" in argv:
        argv = argv[argv.index("serve") + 1:]
    model = "Qwen/Qwen3-0.6B"
    args: dict[str, object] = {}
    if argv and not argv[0].startswith("-"):
        model = argv.pop(0)
        args["model_tag"] = model
    i = 0
    while i < len(argv):
        tok = argv[i]
        i += 1
        if not tok.startswith("--"):
            continue
        name, eq, value = tok[2:].partition("=")
        dest = name.replace("-", "_")
        if dest in MULTI_FLAGS and not eq:
            vals = []
            while i < len(argv) and not argv[i].startswith("--"):
                vals.append(argv[i])
                i += 1
            args[dest] = vals
            continue
        if not eq:
            if i < len(argv) and not argv[i].startswith("--"):
                value = argv[i]
                i += 1
            else:
                args[dest] = True
                continue
        parsed: object = value
        if dest in INT_FLAGS and value.lstrip("-").isdigit():
            parsed = int(value)
        elif dest in FLOAT_FLAGS and value.replace(".", "", 1).isdigit():
            parsed = float(value)
        elif dest in MULTI_FLAGS:
            parsed = [value]
        elif value[:1] in "{[":
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = value
        args[dest] = parsed
    if "model" in args:
        model = str(args["model"])
    elif "model_tag" in args:
        args["model"] = model
    return model, args


def _handler(model: str, names: list[str], keys: list[str], max_len: int,
             busy: standin_busy.Metrics | None) -> type[BaseHTTPRequestHandler]:
    """The HTTP handler: /health, /version, /v1/models (behind the API keys) and /metrics."""

    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path == "/health":
                self._send(200, b"")
            elif path == "/version":
                self._send(200, json.dumps({"version": VERSION}).encode())
            elif path == "/v1/models":
                if keys and self.headers.get("Authorization") not in [f"Bearer {k}" for k in keys]:
                    self._send(401, b'{"error": "Unauthorized"}')
                    return
                now = int(time.time())
                data = [{"id": n, "object": "model", "created": now, "owned_by": "vllm", "root": model,
                         "parent": None, "max_model_len": max_len, "permission": []} for n in names]
                self._send(200, json.dumps({"object": "list", "data": data}).encode())
            elif path == "/metrics" and busy is not None:
                self._send(200, busy.text().encode(), "text/plain; version=0.0.4; charset=utf-8")
            elif path == "/metrics":
                label = f'model_name="{names[0]}"'
                body = (f"vllm:num_requests_running{{{label}}} 0.0\nvllm:num_requests_waiting{{{label}}} 0.0\n"
                        f"vllm:kv_cache_usage_perc{{{label}}} 0.0\n")
                self._send(200, body.encode(), "text/plain; version=0.0.4; charset=utf-8")
            else:
                self._send(404, b'{"detail": "Not Found"}')

        def log_message(self, format: str, *a: object) -> None:
            return

    return Handler


def main() -> None:
    model, args = parse(sys.argv[1:])
    pid = os.getpid()
    port = int(str(args.get("port", 8000)))
    host = str(args.get("host", "0.0.0.0"))
    max_len = int(str(args.get("max_model_len", 4096)))
    names = args.get("served_model_name") or [model]
    keys = args.get("api_key") or ([os.environ["VLLM_API_KEY"]] if os.environ.get("VLLM_API_KEY") else [])

    def log(msg: str, file: str = "api_server.py", line: int = 1000) -> None:
        stamp = time.strftime("%m-%d %H:%M:%S")
        print(f"(APIServer pid={pid}) INFO {stamp} [{file}:{line}] {msg}", flush=True)

    busy = None
    if os.environ.get("STANDIN_BUSY") or os.path.exists("/etc/inferbot/standin-busy"):
        # A loaded, busy server's whole journal and its /metrics (standin_busy.py, beside this file).
        import standin_busy

        busy = standin_busy.run(model, str(names[0]), args, port, VERSION)
    else:
        log(f"vLLM server version {VERSION}, serving model {model}", "api_server.py", 1845)
        log(f"non-default args: {args!r}", "utils.py", 233)
    extra = os.environ.get("STANDIN_LOG_LINES")
    if extra and os.path.exists(extra):
        with open(extra) as f:
            for line in f.read().splitlines():
                print(f"(APIServer pid={pid}) {line}", flush=True)
    fail = os.environ.get("STANDIN_FAIL_FILE")
    if fail and os.path.exists(fail):
        # A failed start: the error lines (secrets in them) end the log, then the process exits 1.
        with open(fail) as f:
            for line in f.read().splitlines():
                print(f"(EngineCore pid={pid}) ERROR {time.strftime('%m-%d %H:%M:%S')} [core.py:708] {line}",
                      flush=True)
        print("RuntimeError: Engine core initialization failed. See root cause above.", flush=True)
        sys.exit(1)
    if busy is None:
        log(f"Using max model len {max_len}", "model.py", 1742)
        log(f"Starting vLLM server on http://{host}:{port}", "api_server.py", 1921)

    handler = _handler(model, names, keys, max_len, busy)
    server = ThreadingHTTPServer(("127.0.0.1" if host in ("0.0.0.0", "") else host, port), handler)
    if busy is None:
        print(f"(APIServer pid={pid}) INFO:     Started server process [{pid}]", flush=True)
        print(f"(APIServer pid={pid}) INFO:     Waiting for application startup.", flush=True)
        print(f"(APIServer pid={pid}) INFO:     Application startup complete.", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
