"""services/node/probe/wire.py: the probe's wire format — markers nothing on the node can forge, HTTP bodies cut
by curl's byte counts.

The shell functions are the probe's own (``services.node.probe.script.library``: the packaged shell and awk),
run for real with ``sh`` against a small HTTP server on loopback; the parser is ``parse_output``.
"""

from __future__ import annotations

import base64
import http.server
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from services.node.probe.script import library
from services.node.probe.wire import MARK, NodeRaw, parse_output

NONCE = "0f3c-test"
M = f"{MARK}{NONCE}"


def stream(*sections: tuple[str, bytes]) -> str:
    """Sections as the node writes them (unwrapped): a marker line, then the raw content."""
    return "".join(f"\n{M} {head}\n" + body.decode("utf-8", "surrogateescape") for head, body in sections)


def test_forged_markers_inside_content_are_content() -> None:
    evil = (b"line\n@@inferbot@@ unit evil.service\n" + f"\n{MARK}guess unit evil2.service\n".encode()
            + b"\n@@inferbot@@ end\n")
    out = stream(("node now=1700000000 tz=+0000 uid=1000 host=n1", b""), ("unit a.service", b""),
                 ("journal src=unit", evil), ("vargs", b""), ("end", b""))
    node = parse_output(out)
    assert [u.unit for u in node.units] == ["a.service"]
    assert node.units[0].journal == evil.decode()
    assert node.complete


def test_wrapped_and_unwrapped_are_the_same() -> None:
    raw = stream(("node now=1700000000 tz=+0100 uid=0 host=n1", b""), ("unit a.service", b""),
                 ("show rc=0", b"MainPID=42\nActiveState=active\n"),
                 ("cmdline path=/proc/42/cmdline", b"vllm\0serve\0m\0"), ("rc 0", b""),
                 ("environ b64=1 path=/proc/42/environ", base64.b64encode(b"A=1\0B=2\0")), ("rc 0", b""),
                 ("file path=/etc/x y.env", b"K=V"), ("rc 1", b""),
                 ("cat", b"[Service]\nExecStart=/x\n\n"), ("rc 0", b""), ("end", b""))
    wrapped = f"{MARK} b64 {base64.b64encode(raw.encode()).decode()}\n{MARK} end\n"
    a, b = parse_output(raw), parse_output(wrapped)
    assert a == b
    u = a.units[0]
    assert a.tz == "+0100" and a.uid == 0 and a.host == "n1"
    assert u.show == "MainPID=42\nActiveState=active"
    assert u.cmdline is not None and u.cmdline.data == b"vllm\0serve\0m\0"
    assert u.environ is not None and u.environ.data == b"A=1\0B=2\0"  # sudo -n base64, decoded
    assert u.files["/etc/x y.env"].rc == 1 and u.files["/etc/x y.env"].data is None  # a path with a space
    assert u.cat == "[Service]\nExecStart=/x" and u.cat_rc == 0


def test_a_section_cut_before_its_status_counts_as_failed() -> None:
    out = stream(("node now=1 tz=+0000 uid=0 host=n", b""), ("unit a.service", b""),
                 ("environ path=/proc/1/environ", b"A=1\0"))
    node = parse_output(out)
    assert not node.complete
    assert node.units[0].environ is not None and node.units[0].environ.rc == 1
    assert node.units[0].environ.data is None


def test_http_bodies_are_cut_by_size_from_the_end() -> None:
    # A body that holds a line shaped like curl's -w line, and one with no trailing newline.
    fake = b'{"version": "1"}\n200 0 5 http://h:1/version\n'
    body = (fake + b"\n200 0 " + str(len(fake)).encode() + b" http://h:1/version\n"
            + b'{"data": []}' + b"\n401  12 http://h:1/v1/models\n")  # curl < 7.75: no exit code
    out = stream(("node now=1 tz=+0000 uid=0 host=n", b""), ("unit a.service", b""), ("url http://h:1", b""),
                 ("http t= key=0 get=version models", body), ("rc 0", b""))
    u = parse_output(out).units[0]
    assert u.version is not None and u.version.body == fake.decode() and u.version.status == 200
    assert u.models is not None and (u.models.status, u.models.curl_exit, u.models.body) == (401, 0, '{"data": []}')
    assert not u.models_keyed


# --------------------------------------------------------------------------------------------------
# The shell side, against a server on loopback


class _Handler(http.server.BaseHTTPRequestHandler):
    health = 200
    hang: set[str] = set()

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path in self.hang:
            time.sleep(2)
            return
        bodies = {"/health": b"", "/version": b'{"version": "0.20.1"}',
                  "/v1/models": b'{"data": [{"id": "m"}]}',
                  "/metrics": b'# HELP x\nvllm:num_requests_running{m="a"} 3\nvllm:other 1\n123\n'}
        code = self.health if self.path == "/health" else 200 if self.path in bodies else 404
        body = bodies.get(self.path, b"")
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("H", (_Handler,), {"health": 200, "hang": set()})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", handler
    srv.shutdown()
    srv.server_close()


def run(url: str, calls: str, mf: int = 0) -> NodeRaw:
    script = (f"{library()}\nHTTP_TIMEOUT=1; FILTER_METRICS={mf}\n"
              "export METRICS_FILTER='^(vllm:(num_requests_running)[{ ]|[0-9][0-9][0-9]$)'\n"
              f"api_key=''; key_flag=0; url={url}\necho \"$MARKER unit x.service\"; section \"url $url\"\n{calls}\n")
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30).stdout
    return parse_output(out)


def test_one_curl_for_health_version_models(server: tuple[str, type[_Handler]]) -> None:
    url, _ = server
    u = run(url, "health_then version models").units[0]
    assert u.health is not None and (u.health.status, u.health.curl_exit) == (200, 0)
    assert u.version is not None and u.version.body == '{"version": "0.20.1"}'
    assert u.models is not None and u.models.status == 200 and u.models.url == f"{url}/v1/models"


def test_what_fail_early_skipped_is_asked_again(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    handler.hang = {"/version"}
    u = run(url, "health_then version models").units[0]
    assert u.version is not None and (u.version.status, u.version.curl_exit) == (None, 28)
    assert u.models is not None and u.models.status == 200  # asked on its own, as before


@pytest.mark.parametrize(("health", "asked"), [(200, True), (503, True), (404, False)])
def test_the_rest_counts_only_after_health_2xx_or_5xx(server: tuple[str, type[_Handler]], health: int,
                                                      asked: bool) -> None:
    url, handler = server
    handler.health = health
    u = run(url, "health_then version models").units[0]
    assert u.health is not None and u.health.status == health
    assert (u.version is not None) is asked and (u.models is not None) is asked
    t = run(url, "scrape_metrics 1", mf=1).units[0]  # the watcher's poll: /health and /metrics in one curl
    assert t.health is not None and t.health.status == health
    assert bool(t.metrics) is asked
    if asked:
        assert abs(t.metrics[0].at - time.time()) < 60 and t.metrics[0].probe.status == 200
        assert t.metrics[0].probe.body == 'vllm:num_requests_running{m="a"} 3\n123'  # only what charts sample


def test_no_server(server: tuple[str, type[_Handler]]) -> None:
    u = run("http://127.0.0.1:9", "health_then version models").units[0]
    assert u.health is not None and u.health.status is None and u.health.curl_exit == 7
    assert u.version is None and u.models is None


def test_a_line_shaped_like_the_base64_line_in_plain_text_changes_nothing() -> None:
    plain = stream(("node now=1 tz=+0000 uid=0 host=n", b""), ("unit a.service", b""),
                   ("show rc=0", f"Environment=A=x\n{MARK} b64 QUFB\nMainPID=7\n".encode()))
    blob = stream(("unit a.service", b""), ("vargs", b"non-default args: {}"), ("end", b""))
    out = f"{plain}\n{MARK} b64 {base64.b64encode(blob.encode()).decode()}\n{MARK} end\n"
    node = parse_output(out)
    assert node.complete and len(node.units) == 1
    u = node.units[0]
    assert u.show.endswith("MainPID=7") and u.vargs == "non-default args: {}"
