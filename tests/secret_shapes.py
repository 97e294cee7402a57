"""Secret shapes for canary tests: each a template around one random part, the part that
must never survive sanitising (the template's fixed text may: it names the kind of key)."""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
KEY = ALNUM + "_-"
UPPER = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
AZURE = ALNUM + "~.-_"
FRAGMENT = 8  # no run of this many characters of a random part may survive


@dataclass(frozen=True, slots=True)
class Shape:
    name: str
    template: str  # "{s}" is the random part (it may appear more than once)
    alphabet: str
    length: int

    def fill(self, secret: str) -> str:
        return self.template.replace("{s}", secret)

    def planted(self, rng: random.Random) -> tuple[str, str]:
        """(the text with a fresh random part, that random part)."""
        secret = "".join(rng.choice(self.alphabet) for _ in range(self.length))
        return self.fill(secret), secret


def _shape(name: str, template: str, alphabet: str = ALNUM, length: int = 40) -> Shape:
    return Shape(name, template, alphabet, length)


SHAPES: tuple[Shape, ...] = (
    # OpenAI, Anthropic, other model providers
    _shape("openai", "sk-{s}", ALNUM, 48),
    _shape("openai_project", "sk-proj-{s}", KEY, 120),
    _shape("openai_service", "sk-svcacct-{s}", KEY, 60),
    _shape("openai_admin", "sk-admin-{s}", KEY, 60),
    _shape("openai_short", "sk-{s}7Q", ALNUM, 10),
    _shape("anthropic", "sk-ant-api03-{s}AA", KEY, 93),
    _shape("anthropic_oauth", "sk-ant-oat01-{s}", KEY, 80),
    _shape("anthropic_admin", "sk-ant-admin01-{s}", KEY, 80),
    _shape("openrouter", "sk-or-v1-{s}", HEX, 64),
    _shape("groq", "gsk_{s}", ALNUM, 52),
    _shape("huggingface", "hf_{s}", ALNUM, 34),
    _shape("xai", "xai-{s}", ALNUM, 80),
    # Google
    _shape("google_api", "AIza{s}", KEY, 35),
    _shape("google_oauth", "ya29.{s}", KEY, 120),
    _shape("google_client_secret", "GOCSPX-{s}", KEY, 28),
    # AWS
    _shape("aws_access_key", "AKIA{s}", UPPER, 16),
    _shape("aws_session_key", "ASIA{s}", UPPER, 16),
    _shape("aws_secret_env", "AWS_SECRET_ACCESS_KEY={s}", B64, 40),
    _shape("aws_secret_ini", "aws_secret_access_key = {s}", B64, 40),
    _shape("aws_secret_json", '{"SecretAccessKey": "{s}"}', B64, 40),
    _shape("aws_session_token", "aws_session_token={s}", B64, 120),
    # Azure
    _shape("azure_openai_key", "api-key: {s}", HEX, 32),
    _shape("azure_subscription", "Ocp-Apim-Subscription-Key: {s}", HEX, 32),
    _shape(
        "azure_storage",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={s}==;EndpointSuffix=x",
        B64,
        86,
    ),
    _shape("azure_service_bus", "Endpoint=sb://x/;SharedAccessKeyName=r;SharedAccessKey={s}=", B64),
    _shape("azure_sas_url", "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig={s}", B64),
    _shape("azure_sas", "SharedAccessSignature sr=x&sig={s}&se=1", ALNUM, 43),
    _shape("azure_ad_secret", "abc8Q~{s}", AZURE, 34),
    # GitHub, GitLab, npm
    _shape("github_pat_classic", "ghp_{s}", ALNUM, 36),
    _shape("github_oauth", "gho_{s}", ALNUM, 36),
    _shape("github_server", "ghs_{s}", ALNUM, 36),
    _shape("github_fine_grained", "github_pat_{s}", ALNUM + "_", 82),
    _shape("gitlab_pat", "glpat-{s}", KEY, 20),
    _shape("gitlab_deploy", "gldt-{s}", KEY, 20),
    _shape("gitlab_runner", "glrt-{s}", KEY, 20),
    _shape("npm", "npm_{s}", ALNUM, 36),
    _shape("npmrc", "//registry.npmjs.org/:_authToken={s}", ALNUM, 36),
    # Slack, Stripe, SendGrid, webhooks
    _shape("slack_bot", "xoxb-{s}", ALNUM + "-", 50),
    _shape("slack_user", "xoxp-{s}", ALNUM + "-", 50),
    _shape("slack_app", "xapp-{s}", ALNUM + "-", 50),
    _shape("slack_webhook", "https://hooks.slack.com/services/{s}", ALNUM, 44),
    _shape("discord_webhook", "https://discord.com/api/webhooks/{s}", ALNUM, 68),
    _shape("stripe_live", "sk_live_{s}", ALNUM, 24),
    _shape("stripe_restricted", "rk_live_{s}", ALNUM, 24),
    _shape("stripe_test", "sk_test_{s}", ALNUM, 24),
    _shape("stripe_webhook", "whsec_{s}", ALNUM, 32),
    _shape("sendgrid", "SG.{s}.{s}", KEY, 22),
    # JWTs and key blocks
    _shape("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJ{s}.{s}", KEY, 40),
    _shape(
        "pem_rsa", "-----BEGIN RSA PRIVATE KEY-----\n{s}\n-----END RSA PRIVATE KEY-----", B64, 64
    ),
    _shape(
        "pem_escaped", '"-----BEGIN PRIVATE KEY-----\\n{s}\\n-----END PRIVATE KEY-----\\n"', B64, 64
    ),
    _shape("pem_cut", "-----BEGIN EC PRIVATE KEY-----\n{s}", B64, 64),
    _shape(
        "openssh",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n{s}\n-----END OPENSSH PRIVATE KEY-----",
        B64,
    ),
    _shape(
        "pgp",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{s}\n=Ab12\n-----END PGP PRIVATE KEY BLOCK-----",
        B64,
        64,
    ),
    # URL credentials
    _shape("url_userinfo", "postgres://admin:{s}@db.internal:5432/app", ALNUM, 24),
    _shape("redis_password", "redis://:{s}@cache:6379/0", ALNUM, 24),
    _shape("url_query", "https://api.example.com/v1/files?api_key={s}&x=1", ALNUM, 32),
    # headers
    _shape("bearer", "Authorization: Bearer {s}", ALNUM),
    _shape("bare_bearer", "Bearer {s}", ALNUM),
    _shape("basic", "Authorization: Basic {s}=", B64, 32),
    _shape("cookie", "Cookie: sid={s}; theme=dark", ALNUM),
    _shape("x_api_key", "x-api-key: {s}", ALNUM, 32),
    _shape("header_tuple", "[(b'authorization', b'Bearer {s}')]", ALNUM),
    # assignments: plain, quoted, escaped, connection strings, punctuation
    _shape("password", "password={s}", ALNUM, 24),
    _shape("json_password", '{"password": "{s}"}', ALNUM, 24),
    _shape("escaped_json", '{\\"password\\": \\"{s}\\"}', ALNUM, 24),
    _shape("double_escaped_json", '{\\\\\\"token\\\\\\": \\\\\\"{s}\\\\\\"}', ALNUM, 24),
    _shape("quote_inside", "password='a'{s}'", ALNUM, 24),
    _shape("quote_inside_first", "password='{s}'b'", ALNUM, 24),
    _shape("double_quote_inside", 'export DB_PASSWORD="x"{s}"', ALNUM, 24),
    _shape("backtick", "PASSWORD=`{s}`", ALNUM, 24),
    _shape("escaped_single", "password=\\'{s}\\'", ALNUM, 24),
    _shape("punctuation_first", "password=!{s}", ALNUM, 24),
    _shape("bracket_first", "secret=({s})", ALNUM, 24),
    _shape("conn_pwd", "Server=db;User Id=sa;PWD={s};", ALNUM, 24),
    _shape("conn_pwd_lower", "server=db;uid=sa;pwd={s};", ALNUM, 24),
    _shape("conn_password", "Server=db;User ID=sa;Password={s};Encrypt=true", ALNUM, 24),
    _shape("client_secret", "client_secret: {s}", ALNUM, 32),
    # split by zero-width characters
    _shape("zero_width_key", "sk-ant-api03-{s}\u200b{s}", KEY, 24),
    _shape("zero_width_prefix", "gh\u200dp_{s}", ALNUM, 36),
    _shape("zero_width_name", "pass\u2060word={s}", ALNUM, 24),
)

SHAPE_BY_NAME = {shape.name: shape for shape in SHAPES}
assert len(SHAPE_BY_NAME) == len(SHAPES)


def fragments(secret: str, width: int = FRAGMENT) -> list[str]:
    """Every run of `width` characters of `secret` (the whole of a shorter one)."""
    return [secret[i : i + width] for i in range(max(1, len(secret) - width + 1))]


def leaked(secrets: list[str], haystack: str, *, ignore: str = "") -> list[str]:
    """The fragments of `secrets` found in `haystack`, except those that also occur in
    `ignore` (text around the secrets that may repeat a short run of one by chance)."""
    return [f for s in secrets for f in fragments(s) if f in haystack and f not in ignore]
