"""Secret shapes for the real-systemd tier: where each one is planted and the literal values that must never
appear in any output (text, ``--json``, Slack blocks and files, the bot's log, the state database, errors).

``where`` says how the shape reaches the node:

* ``environment`` — one ``Environment=`` item of the corpus unit (``text`` is ``NAME=value``);
* ``env-file`` — one line of its ``EnvironmentFile=`` (``text`` is the line as written);
* ``flag`` — argv words appended to its ``ExecStart=`` (``text`` in unit-file syntax, ``%%``/``$$`` escaped);
* ``journal`` — one line the stand-in server logs at startup (``text`` as logged, after the pid prefix).

Values are unique, long enough that finding one in an output is never a coincidence, and fake.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Where = Literal["environment", "env-file", "flag", "journal"]


@dataclass(frozen=True)
class Shape:
    """One way a secret can be written, and the values that must stay on the node."""

    name: str
    where: Where
    text: str
    values: tuple[str, ...]


def _s(name: str, where: Where, text: str, *values: str) -> Shape:
    return Shape(name, where, text, values)


PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDcorpusPEMbody77"

SHAPES: tuple[Shape, ...] = (
    # --- Environment= in the unit --------------------------------------------------------------------
    _s("HF_TOKEN", "environment", "HF_TOKEN=hf_corpusHFtok4f8a2b9c1d7e3f6a0b", "hf_corpusHFtok4f8a2b9c1d7e3f6a0b"),
    _s("HUGGING_FACE_HUB_TOKEN", "environment", "HUGGING_FACE_HUB_TOKEN=hf_corpusHubOld7c2e9a4b1d8f",
       "hf_corpusHubOld7c2e9a4b1d8f"),
    _s("VLLM_API_KEY", "environment", "VLLM_API_KEY=vk-corpusVllmEnv93jd72hs", "vk-corpusVllmEnv93jd72hs"),
    _s("DB_PASS", "environment", "DB_PASS=corpusDbPass8812xq", "corpusDbPass8812xq"),
    _s("REDIS_PW", "environment", "REDIS_PW=corpusRedisPw5531zz", "corpusRedisPw5531zz"),
    _s("SLACK_WEBHOOK_URL", "environment",
       "SLACK_WEBHOOK_URL=https://hooks.slack.test/services/T000/B000/corpusWebhook9a8b7c",
       "corpusWebhook9a8b7c"),
    _s("HF_TOKENS plural", "environment", "HF_TOKENS=hf_corpusPluralA11,hf_corpusPluralB22",
       "hf_corpusPluralA11", "hf_corpusPluralB22"),
    _s("API_KEYS plural", "environment", "API_KEYS=corpusApiKeysOne71 corpusApiKeysTwo72",
       "corpusApiKeysOne71", "corpusApiKeysTwo72"),
    _s("quoted value with spaces", "environment", "MY_SECRET=corpus secret with spaces 4410",
       "corpus secret with spaces 4410"),
    _s("CREDENTIALS", "environment", "GCP_CREDENTIALS=corpusGcpCred0099aa", "corpusGcpCred0099aa"),
    _s("PRIVATE", "environment", "SIGNING_PRIVATE=corpusSignPriv6621", "corpusSignPriv6621"),
    _s("DSN", "environment", "SENTRY_DSN=https://corpusSentryKey55@sentry.test/42", "corpusSentryKey55"),
    _s("URL with credentials", "environment", "DATABASE_URL=postgres://app:corpusUrlPw@x/y@db.test:5432/app",
       "corpusUrlPw@x/y"),
    _s("AWS_SECRET_ACCESS_KEY", "environment", "AWS_SECRET_ACCESS_KEY=corpusAwsSecret/K7MDENG+bPxRfiCYEX",
       "corpusAwsSecret/K7MDENG+bPxRfiCYEX"),
    _s("S3_SECRET_ACCESS_KEY", "environment", "S3_SECRET_ACCESS_KEY=corpusS3Secret44jd8", "corpusS3Secret44jd8"),
    _s("PASSWD", "environment", "LDAP_PASSWD=corpusLdapPasswd31", "corpusLdapPasswd31"),
    # --- EnvironmentFile= -----------------------------------------------------------------------------
    _s("env file OPENAI_API_KEY", "env-file", "OPENAI_API_KEY=sk-proj-corpusOpenAI0a1b2c3d4e5f6g7h8i9j",
       "sk-proj-corpusOpenAI0a1b2c3d4e5f6g7h8i9j"),
    _s("env file ANTHROPIC_API_KEY", "env-file",
       "ANTHROPIC_API_KEY='sk-ant-api03-corpusAnthropic1234567890abcdef'",
       "sk-ant-api03-corpusAnthropic1234567890abcdef"),
    _s("env file double-quoted spaces", "env-file", 'SERVICE_PASSWORD="corpus dq pass 7781"', "corpus dq pass 7781"),
    _s("env file GITHUB_TOKEN", "env-file", "GITHUB_TOKEN=ghp_corpusGithub1234567890abcdefABCDEF12",
       "ghp_corpusGithub1234567890abcdefABCDEF12"),
    _s("env file GITLAB token", "env-file", "GL_TOKEN=glpat-corpusGitlab12345678", "glpat-corpusGitlab12345678"),
    _s("env file NVIDIA key", "env-file", "NGC_API_KEY=nvapi-corpusNvidia1234567890abcdefghij",
       "nvapi-corpusNvidia1234567890abcdefghij"),
    _s("env file Databricks", "env-file", "DATABRICKS_TOKEN=dapicorpus0123456789abcdef0123456789",
       "dapicorpus0123456789abcdef0123456789"),
    _s("env file WANDB", "env-file", "WANDB_API_KEY=corpusWandb0123456789abcdef0123456789abcd",
       "corpusWandb0123456789abcdef0123456789abcd"),
    # --- flags in ExecStart= --------------------------------------------------------------------------
    _s("--api-key two values", "flag", "--api-key sk-corpusFlagKeyOne11 sk-corpusFlagKeyTwo22",
       "sk-corpusFlagKeyOne11", "sk-corpusFlagKeyTwo22"),
    _s("--hf-token=", "flag", "--hf-token=hf_corpusFlagHfTok8a7b6c5d", "hf_corpusFlagHfTok8a7b6c5d"),
    _s("kv-transfer-config nested object", "flag",
       "--kv-transfer-config '{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_connector_extra_config\":"
       "{\"api_key\":{\"v\":\"corpusKvNested77\"}}}'", "corpusKvNested77"),
    _s("model-loader-extra-config number", "flag", "--model-loader-extra-config '{\"token\": 12345678901}'",
       "12345678901"),
    _s("otlp endpoint with credentials", "flag",
       "--otlp-traces-endpoint https://otel:corpusOtlpPw66@otel.test:4318", "corpusOtlpPw66"),
    _s("additional-config secret", "flag",
       "--additional-config '{\"storage\":{\"secret_key\":\"corpusAddlSecret88\",\"region\":\"x\"}}'",
       "corpusAddlSecret88"),
    # --- journal lines -------------------------------------------------------------------------------
    _s("journal token=", "journal", "INFO 12-02 10:00:01 [x.py:1] connecting with token=corpusJTok01x",
       "corpusJTok01x"),
    _s("journal password=", "journal", "INFO 12-02 10:00:01 [x.py:1] login password=corpusJPass02x ok",
       "corpusJPass02x"),
    _s("journal secret:", "journal", "INFO 12-02 10:00:01 [x.py:1] secret: corpusJSecret03x", "corpusJSecret03x"),
    _s("journal x-api-key header", "journal", "DEBUG 12-02 10:00:01 [x.py:1] header x-api-key: corpusJXApi04x",
       "corpusJXApi04x"),
    _s("journal Bearer short", "journal", "DEBUG 12-02 10:00:01 [x.py:1] Authorization: Bearer cJB05xy",
       "cJB05xy"),
    _s("journal AWS temporary key", "journal", "INFO 12-02 10:00:01 [s3.py:1] using key ASIACORPUSAWS0606XY",
       "ASIACORPUSAWS0606XY"),
    _s("journal aws_secret_access_key =", "journal",
       "INFO 12-02 10:00:01 [s3.py:1] aws_secret_access_key = corpusJAws07secretVal", "corpusJAws07secretVal"),
    _s("journal github_pat", "journal",
       "INFO 12-02 10:00:01 [x.py:1] cloned with github_pat_11CORPUS0808_abcdefghijklmnopqrstuvwxyz012345",
       "github_pat_11CORPUS0808_abcdefghijklmnopqrstuvwxyz012345"),
    _s("journal JSON apiKey", "journal", 'INFO 12-02 10:00:01 [x.py:1] cfg {"apiKey": "corpusJApiKey09x"}',
       "corpusJApiKey09x"),
    _s("journal JSON hf-token", "journal", 'INFO 12-02 10:00:01 [x.py:1] cfg {"hf-token": "corpusJHfTok10x"}',
       "corpusJHfTok10x"),
    _s("journal quoted HF_TOKEN", "journal", "INFO 12-02 10:00:01 [x.py:1] HF_TOKEN='corpus j quoted 11'",
       "corpus j quoted 11"),
    _s("journal URL password with @ and /", "journal",
       "INFO 12-02 10:00:01 [x.py:1] fetching https://u:corpus@J/pw12@models.test/x", "corpus@J/pw12"),
    _s("journal Slack bot token", "journal", "INFO 12-02 10:00:01 [x.py:1] notify xoxb-1234-5678-corpusSlack13",
       "xoxb-1234-5678-corpusSlack13"),
    _s("journal Google API key", "journal", "INFO 12-02 10:00:01 [x.py:1] key AIzaSyCorpusGoogle14abcdefghijklmnopqr",
       "AIzaSyCorpusGoogle14abcdefghijklmnopqr"),
    _s("journal JWT", "journal",
       "INFO 12-02 10:00:01 [x.py:1] jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjb3JwdXMxNSJ9.corpusJwtSig15abc",
       "eyJzdWIiOiJjb3JwdXMxNSJ9", "corpusJwtSig15abc"),
    _s("journal PEM private key", "journal",
       f"INFO 12-02 10:00:01 [x.py:1] -----BEGIN PRIVATE KEY----- {PEM_BODY} -----END PRIVATE KEY-----",
       PEM_BODY),
    _s("journal Namespace api_key list", "journal",
       "INFO 12-02 10:00:01 [x.py:1] args: Namespace(api_key=['corpusNsA16', 'corpusNsB16'], port=8000)",
       "corpusNsA16", "corpusNsB16"),
    _s("journal KEY= upper", "journal", "INFO 12-02 10:00:01 [x.py:1] env KEY=corpusJUpperKey17", "corpusJUpperKey17"),
    _s("journal SECRET= upper", "journal", "INFO 12-02 10:00:01 [x.py:1] env SECRET=corpusJUpperSec18",
       "corpusJUpperSec18"),
    _s("journal literal seen elsewhere", "journal",
       "INFO 12-02 10:00:01 [x.py:1] retrying with corpusDbPass8812xq", "corpusDbPass8812xq"),
)


CROSS_UNIT = "journal literal seen elsewhere"  # repeats DB_PASS's value, seen in the same unit's Environment=


def values() -> list[str]:
    """Every literal secret value of the corpus."""
    return [v for s in SHAPES for v in s.values]


def by_where(where: Where) -> list[Shape]:
    """The shapes planted in one place."""
    return [s for s in SHAPES if s.where == where]
