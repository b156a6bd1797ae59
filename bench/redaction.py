"""Redaction cost on a logs answer: our ``redact_patterns`` against ``detect-secrets``, over 200 journal lines.

    python -m bench.redaction [--rounds 20]

The logs intent redacts up to 200 journal lines per service, and a question's whole client budget is about
3 ms per node, so redaction of 200 lines has to cost well under a millisecond or two. The lines are realistic
vLLM output (startup config dump, route table, per-request and stats lines, NCCL settings) with a few secrets
mixed in (a ``--api-key`` argv echo, an ``HF_TOKEN=`` line, a URL with credentials, a Bearer header, an AWS key).

Measured, each as the median of ``--rounds`` passes over the same 200 lines:

* ``redact_patterns`` (this project): the cheap pre-checks, gitleaks' rules behind their keyword gate
  (``services/redaction/gitleaks.py``), inferbot's own token shapes and the keyed scanner; ``Redactor.text`` adds
  five known literal values on top;
* gitleaks' rules alone (``RuleSet.spans``: the gate, then the rules it lets through), as used, and with
  ``generic-api-key`` (left out of inferbot: the keyed scanner does its job with inferbot's names);
* ``detect-secrets`` ``scan_line`` (its documented ad-hoc API, default plugins and filters), and its plugins'
  ``analyze_line`` called directly (the cheapest way to use its detectors; still only detects, we would still
  have to replace the spans);
* the first call in a fresh process (loading the rules: the digest, or the TOML through ``tomllib``);
* what each finds: a list of provider token shapes, and the secrets corpus of the tests
  (``tests/samples/secrets/corpus.py``, every free-text shape), and how many clean lines each flags.

Decision (issue 22; README "Secrets"): the provider token shapes come from gitleaks' rules, vendored as data,
with inferbot's hand-kept list only for what they lack; detect-secrets is not used (far slower, and its entropy
detectors flag ordinary words of every clean vLLM line). Without detect-secrets installed the bench says so.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from services.redact import Redactor, redact_lines, redact_patterns
from services.redaction import gitleaks

_BASE = [
    "INFO 12-02 10:00:00 [__init__.py:239] Automatically detected platform cuda.",
    "INFO 12-02 10:00:01 [api_server.py:1043] vLLM API server version 0.11.0",
    "INFO 12-02 10:00:01 [cli_args.py:325] non-default args: {'model_tag': '/models/Llama-3.1-70B', "
    "'tensor_parallel_size': 8, 'max_num_batched_tokens': 8192, 'enable_prefix_caching': True}",
    "INFO 12-02 10:00:05 [config.py:717] This model supports multiple tasks: {'generate', 'embed'}.",
    "INFO 12-02 10:00:05 [config.py:2003] Chunked prefill is enabled with max_num_batched_tokens=8192.",
    "INFO 12-02 10:00:06 [core.py:58] Initializing a V1 LLM engine (v0.11.0) with config: "
    "model='/models/Llama-3.1-70B', speculative_config=None, tokenizer='/models/Llama-3.1-70B', "
    "skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, trust_remote_code=False, "
    "dtype=torch.bfloat16, max_seq_len=32768, download_dir=None, load_format=auto, tensor_parallel_size=8, "
    "kv_cache_dtype=auto, enable_prefix_caching=True, compilation_config={\"level\":3,\"cudagraph_mode\":"
    "\"FULL_AND_PIECEWISE\"}",
    "INFO 12-02 10:00:07 [parallel_state.py:1004] rank 3 in world size 8 is assigned as DP rank 0, PP rank 0, "
    "TP rank 3",
    "INFO 12-02 10:00:07 [pynccl.py:69] vLLM is using nccl==2.21.5 NCCL_IB_HCA=mlx5 NCCL_SOCKET_IFNAME=eth0",
    "INFO 12-02 10:00:40 [default_loader.py:262] Loading weights took 32.51 seconds",
    "INFO 12-02 10:00:41 [gpu_model_runner.py:1892] Model loading took 16.43 GiB and 33.80 seconds",
    "INFO 12-02 10:01:02 [kv_cache_utils.py:716] GPU KV cache size: 1,234,560 tokens",
    "INFO 12-02 10:01:02 [kv_cache_utils.py:720] Maximum concurrency for 32,768 tokens per request: 37.68x",
    "INFO 12-02 10:01:20 [gpu_model_runner.py:2290] Graph capturing finished in 18 secs, took 0.56 GiB",
    "INFO 12-02 10:01:21 [launcher.py:29] Available routes are:",
    "INFO 12-02 10:01:21 [launcher.py:37] Route: /v1/chat/completions, Methods: POST",
    "INFO:     Started server process [12345]",
    "INFO:     Application startup complete.",
    "INFO:     10.0.0.7:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
    "INFO 12-02 10:02:00 [loggers.py:116] Engine 000: Avg prompt throughput: 512.3 tokens/s, Avg generation "
    "throughput: 88.1 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.1%, Prefix cache hit "
    "rate: 41.2%",
    "WARNING 12-02 10:02:30 [protocol.py:58] The following fields were present in the request but ignored: "
    "{'top_k_extra'}",
]
_SECRETS = [
    "INFO 12-02 10:00:01 [cli_args.py:300] args: serve /models/x --api-key sk-abc123def456 sk-second789 --port 8000",
    "DEBUG 12-02 10:00:02 env HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz012345",
    "INFO 12-02 10:00:03 [otel.py:20] exporting to https://otel:hunter2@collector.internal:4317",
    "DEBUG 12-02 10:00:04 request headers: Authorization: Bearer short1",
    "ERROR 12-02 10:00:05 [s3.py:77] S3 AccessDenied for AKIAIOSFODNN7EXAMPLE",
]
_KNOWN = ["sk-abc123def456", "sk-second789", "hf_abcdefghijklmnopqrstuvwxyz012345", "hunter2", "short1"]
# Provider shapes every detector should find (coverage table).
_SHAPES = {
    "aws AKIA": "AKIAIOSFODNN7EXAMPLE",
    "aws ASIA": "ASIAY34FZKBOKMUTVV7A",
    "github ghp_": "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "github_pat_": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOP",
    "gitlab glpat-": "glpat-xxxxxxxxxxxxxxxxxxxx",
    "slack xoxb-": "xoxb-1234567890-0987654321-abcdefABCDEF",
    "huggingface hf_": "hf_abcdefghijklmnopqrstuvwxyz012345",
    "openai sk-proj-": "sk-proj-abcdefghijklmnopqrstuvwxyz0123",
    "anthropic sk-ant-": "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
    "nvidia nvapi-": "nvapi-AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "databricks dapi": "dapi0123456789abcdef0123456789abcdef",
    "google AIza": "AIzaSyA-1234567890abcdefghijklmnopqrstu",
    "google ya29.": "ya29.a0AfH6SMBx-abcdefghijklmnopq",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "short bearer": "Authorization: Bearer short1",
    "quoted with spaces": "HF_TOKEN='a b c'",
    "pypi pypi-": "pypi-AgEIcHlwaS5vcmczz2Tj2J2ek7up7NJQmZpTUcw9U2kA7ozhSxYTVVFPLE6J3iURlpcZ0rN3iIP3BG9g7sxcd_oPM1h5B5",
    "sendgrid SG.": "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",
    "stripe sk_live_": "sk_live_h3gm1ICBnISEaWC9j6YCQpEToJ6U5zEcA78v1GSjyAcm6eEhrE88Wy0G5bBFRX",
    "replicate r8_": "r8_Trf3b9lrQfVZHGuP2Wa6eXBpXdivPpzYCL293",
    "groq gsk_": "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",
    "vault hvs.": "hvs.CAESIE4TvfkEtZYxz8k3S55M_qslVs1ATrfjq8vvtB-7BealGS3HGhfkPSjfOkwRa7JH1n8nS2qIXHvh-qWFjPbeCeo"
                  "UrKfY",
    "npm npm_": "npm_vC5AZpluYRHQBOZWVYB6vLisTBPTtjzfw8nC",
    "twilio SK": "SK2c695dd1272d2b0ab9c231fbcf8bbbd8",
    "mailgun key-": "mailgun key-c45a264501752455b794823461191f67",
    "url token user": "https://Gjnl2v7kEnDtDP6qVDAS0En3gxkLtaW4g3SExuRc@otel.example.net/v1",
    "curl -u": "curl -u deploy:MlxbXQS3Mqe8d5zFcB https://x.example.net",
}


def lines(n: int = 200) -> list[str]:
    """``n`` journal lines: the base lines repeated, with one secret line every 40 lines."""
    out: list[str] = []
    while len(out) < n:
        i = len(out)
        out.append(_SECRETS[(i // 40) % len(_SECRETS)] if i % 40 == 39 else _BASE[i % len(_BASE)])
    return out


def _time(fn: Callable[[list[str]], object], data: list[str], rounds: int) -> float:
    fn(data)  # warm caches (regex compilation, lru caches)
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn(data)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1000


def _ours(data: list[str]) -> object:
    return [redact_patterns(line) for line in data]


def _ours_known(data: list[str]) -> object:
    r = Redactor(_KNOWN)
    return [r.text(line) for line in data]


def _ours_lines(data: list[str]) -> object:
    return Redactor(_KNOWN).lines(data)


def _gitleaks_used(data: list[str]) -> object:
    rules = gitleaks.rules()
    return [rules.spans(line) for line in data]


@functools.cache
def _gitleaks_with_generic() -> gitleaks.RuleSet:
    return gitleaks.from_digest(gitleaks.digest(gitleaks.TOML.read_text(encoding="utf-8"), exclude=frozenset()))


def _gitleaks_all(data: list[str]) -> object:
    rules = _gitleaks_with_generic()
    return [rules.spans(line) for line in data]


def _first_call(source: str) -> float:
    """ms for loading the rules and redacting one line, in a fresh process (the median of 5)."""
    code = ("import time; t = time.perf_counter(); from services.redaction import gitleaks as g; "
            + ("r = g.rules()" if source == "digest" else
               "r = g.from_digest(g.digest(g.TOML.read_text(encoding='utf-8')))")
            + "; r.spans('INFO 12-02 10:00:01 [api_server.py:1043] vLLM API server version 0.11.0 sk ey s.');"
              " print((time.perf_counter() - t) * 1000)")
    runs = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
            for _ in range(5)]
    return statistics.median(runs)


def _detect_secrets() -> tuple[Callable[[list[str]], object], Callable[[list[str]], object],
                               Callable[[str], bool]] | None:
    if importlib.util.find_spec("detect_secrets") is None:
        return None
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    def scan(data: list[str]) -> object:
        with default_settings():
            return [list(scan_line(line)) for line in data]

    plugins = [cls() for cls in get_mapping_from_secret_type_to_class().values()]

    def bare(data: list[str]) -> object:
        return [[s for p in plugins for s in p.analyze_string(line)] for line in data]

    def finds(text: str) -> bool:
        # Its entropy plugins flag nearly every word in ad-hoc mode, so coverage counts the named detectors.
        with default_settings():
            return any("Entropy" not in s.type for s in scan_line(f"x {text} y"))

    return scan, bare, finds


def _false_positives(data: list[str]) -> int:
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    with default_settings():
        return sum(1 for line in data if line not in _SECRETS and list(scan_line(line)))


def main(argv: list[str] | None = None) -> None:
    """Print ms per 200 lines and per line for each contender, then the shape coverage."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--lines", type=int, default=200)
    args = ap.parse_args(argv)
    data = lines(args.lines)
    rows: list[tuple[str, float]] = [("redact_patterns", _time(_ours, data, args.rounds)),
                                     ("Redactor.text (5 known values)", _time(_ours_known, data, args.rounds)),
                                     ("Redactor.lines (5 known, PEM-aware)", _time(_ours_lines, data, args.rounds))]
    rows.append(("gitleaks rules (as used)", _time(_gitleaks_used, data, args.rounds)))
    rows.append(("gitleaks rules + generic-api-key", _time(_gitleaks_all, data, args.rounds)))
    assert redact_lines(data) == _ours(data)
    ds = _detect_secrets()
    if ds:
        scan, bare, _ = ds
        rows.append(("detect-secrets scan_line", _time(scan, data, max(3, args.rounds // 4))))
        rows.append(("detect-secrets plugins analyze_string", _time(bare, data, max(3, args.rounds // 4))))
    print(f"{len(data)} vLLM journal lines ({sum(1 for x in data if x in _SECRETS)} with secrets), "
          f"median of {args.rounds} rounds")
    for name, ms in rows:
        print(f"  {name:40s} {ms:8.3f} ms / {len(data)} lines   {ms * 1000 / len(data):8.2f} µs / line")
    if ds:
        with_default = _false_positives(data)
        print(f"  detect-secrets scan_line flags {with_default} of {sum(1 for x in data if x not in _SECRETS)} "
              "lines that hold no secret (its entropy plugins), so its hits cannot be redacted as they are")
    else:
        print("  detect-secrets: not installed, not measured (pip install detect-secrets to compare)")
    print(f"first call in a fresh process (load the rules, redact one line): digest {_first_call('digest'):.1f} ms, "
          f"TOML through tomllib {_first_call('toml'):.1f} ms")
    clean = [x for x in data if x not in _SECRETS]
    flagged = {"ours": sum(1 for x in clean if redact_patterns(x) != x),
               "gitleaks": sum(1 for x in clean if gitleaks.rules().spans(x)),
               "gitleaks+generic": sum(1 for x in clean if _gitleaks_with_generic().spans(x))}
    print(f"clean lines changed or flagged (of {len(clean)}): " + ", ".join(f"{k} {v}" for k, v in flagged.items()))
    print("shape coverage (found / not found):")
    print(f"  {'':22s} {'ours':5s} {'gitleaks':9s} {'+generic':9s} detect-secrets")
    for label, text in _SHAPES.items():
        line = f"x {text} y"
        cols = [redact_patterns(line) != line, bool(gitleaks.rules().spans(line)),
                bool(_gitleaks_with_generic().spans(line))]
        theirs = ("yes" if ds[2](text) else "no") if ds else "-"
        print(f"  {label:22s} " + " ".join(f"{'yes' if c else 'no':9s}" if i else f"{'yes' if c else 'no':5s}"
                                           for i, c in enumerate(cols)) + f" {theirs}")
    _corpus_coverage(ds[2] if ds else None)


def _corpus_coverage(detect_secrets: Callable[[str], bool] | None) -> None:
    """How many free-text shapes of the tests' secrets corpus each one finds (every secret of the shape gone)."""
    from tests.samples.secrets.corpus import CORPUS

    shapes = [s for s in CORPUS if "\n" not in s.text]

    def gone(spans: list[tuple[int, int, str]], text: str, secrets: tuple[str, ...]) -> bool:
        return all(any(a <= text.find(x) and text.find(x) + len(x) <= b + 1 for a, b, _ in spans)
                   or any(text[a:b] in x or x in text[a:b] for a, b, _ in spans) for x in secrets)

    ours = sum(1 for s in shapes if not any(x in redact_patterns(s.text) for x in s.secrets))
    used = sum(1 for s in shapes if gone(gitleaks.rules().spans(s.text), s.text, s.secrets))
    full = sum(1 for s in shapes if gone(_gitleaks_with_generic().spans(s.text), s.text, s.secrets))
    theirs = sum(1 for s in shapes if detect_secrets(s.text)) if detect_secrets else None
    print(f"secrets corpus ({len(shapes)} free-text shapes): ours {ours}, gitleaks {used}, gitleaks+generic {full}"
          + (f", detect-secrets (named detectors, any finding) {theirs}" if theirs is not None else ""))


if __name__ == "__main__":
    main()
