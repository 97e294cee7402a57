"""Credentials recognised by their own shape, wherever they appear: provider key prefixes,
JWTs, private-key blocks (PEM and PGP), Azure AD client secrets and webhook URLs. Pure,
stdlib only; used by catalogue/sanitize.py, which also finds credentials by their names.

Every pattern starts with a literal (CPython scans for it with a fast substring search) and
checks what must come before it by a look-behind after that literal, never by a leading
one; bodies are single character classes, or a class and a dot-separated repeat that cannot
overlap, so each match is linear.
"""

from __future__ import annotations

import re
import string
from typing import Final

__all__ = ["MARK", "redact_key_blocks", "redact_key_shapes"]

MARK: Final = "[REDACTED]"

# A private-key block to its END line, or to the end of the text when it was cut.
_KEY_BLOCK = re.compile(
    r"-----BEGIN [A-Z0-9 ]{0,32}PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END [A-Z0-9 ]{0,32}PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)

# A key body: ASCII key characters, dots only between runs of them (GitLab's newer tokens).
# A key starts a word: no letter or digit before it, unless that is the letter of an
# escape (`\n`, `\t`, `\r` in JSON or a repr: "...\nsk-proj-...").
_NB = r"(?:(?<![A-Za-z0-9])|(?<=\\[nrt]))"
_BODY = r"(?P<body>[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)"
# The shortest body a prefixed key may have; below LONG_BODY only an `sk-` key whose body
# mixes letters and digits counts (other prefixes name models and packages: pplx-7b-chat).
SHORT_BODY: Final = 10
LONG_BODY: Final = 20
# Look-behinds are fixed-width: one per GitLab token prefix.
_GITLAB_PREFIXES = ("glpat", "gldt", "glrt", "glptt", "glcbt", "glimt", "glsoat", "glffct", "gloas")
_GITLAB = "".join(f"|(?<={_NB}{prefix}-)" for prefix in _GITLAB_PREFIXES)
_KEY_DASH = re.compile(
    rf"-(?=[A-Za-z0-9_-]{{{SHORT_BODY}}})(?:(?<={_NB}sk-)(?P<sk>)(?P<sub>ant-(?:[a-z]{{2,8}}\d\d-)?"
    rf"|or-v1-|proj-|svcacct-|admin-)?|(?<={_NB}xai-)|(?<={_NB}pplx-)|(?<={_NB}xox[abposre]-)"
    rf"|(?<={_NB}xapp-){_GITLAB}|(?<={_NB}GOCSPX-)){_BODY}"
)
_KEY_UNDERSCORE = re.compile(
    rf"_(?=[A-Za-z0-9_-]{{{LONG_BODY}}})(?:(?<={_NB}gsk_)|(?<={_NB}gh[pousr]_)|(?<={_NB}hf_)"
    rf"|(?<={_NB}r8_)|(?<=github_pat_)|(?<={_NB}[sr]k_live_)|(?<={_NB}[sr]k_test_)"
    rf"|(?<={_NB}npm_)|(?<={_NB}whsec_)|(?<={_NB}glpat_)){_BODY}"
)
_KEY_A = re.compile(
    r"A(?:(?<![A-Za-z0-9]A)|(?<=\\[nrt]A))(?:Iza(?P<body>[A-Za-z0-9_-]{20,})|[KS]IA(?=[A-Z0-9]{16})[\w-]+)"
)
_KEY_OAUTH = re.compile(rf"ya29\.(?<={_NB}ya29\.)(?=[A-Za-z0-9_-]{{{LONG_BODY}}}){_BODY}")
_JWT = re.compile(
    r"eyJ(?:(?<![A-Za-z0-9]eyJ)|(?<=\\[nrt]eyJ))[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}(?:\.[\w-]*)?"
)
# Azure AD client secrets: three characters, a digit, "Q~", then 30 or more.
_AZURE_SECRET = re.compile(
    r"Q~(?<=(?:(?<![\w~.-])|(?<=\\[nrt]))[\w~.-]{3}\dQ~)(?P<body>[\w~.-]{30,})"
)
# SendGrid keys: SG.<22>.<43>
_SENDGRID = re.compile(rf"SG\.(?<={_NB}SG\.)(?P<body>[\w-]{{16,}}\.[\w-]{{16,}})")
# Webhook URLs carry their secret in the path.
_WEBHOOK = re.compile(
    r"(?:hooks\.slack\.com/(?:services|workflows|triggers)|discord(?:app)?\.com/api/webhooks)/"
    r"(?P<body>[A-Za-z0-9/_-]+)"
)

# What the look-behinds of _KEY_DASH require before the dash it scans from: a text holding
# none of these cannot hold such a key, and is not scanned (a dash is in most error texts,
# and each one costs the look-ahead and look-behinds). The same check for _KEY_A costs more
# than its scan saves (measured in instructions): a capital A is rarer, and cheap to try.
_DASH_PREFIXES = ("sk-", "xai-", "pplx-", "xox", "xapp-", "gl", "GOCSPX-")

# Lowercase literals one of which a text holds (lowercased) whenever some pattern here can
# match in it: what each pattern requires before or at its start, read off the patterns
# above (a test checks that a text with none of them is left as it is). The sanitiser
# skips `redact_key_shapes` and `redact_key_blocks` on a text that holds none.
SHAPE_TRIGGERS: Final = (
    *("sk-", "xai-", "pplx-", "xox", "xapp-", "gocspx-"),  # _KEY_DASH
    *(f"{prefix}-" for prefix in _GITLAB_PREFIXES),
    # _KEY_UNDERSCORE
    *("gsk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "hf_", "r8_", "github_pat_"),
    *("k_live_", "k_test_", "npm_", "whsec_", "glpat_"),
    *("aiza", "akia", "asia"),  # _KEY_A
    *("ya29.", "q~", "sg.", "eyj", "hooks"),  # OAuth, Azure, SendGrid, JWT, webhooks
)
BLOCK_TRIGGERS: Final = ("private key",)  # _KEY_BLOCK

_LETTERS: Final = frozenset(string.ascii_letters)
_DIGITS: Final = frozenset(string.digits)


def _keep_prefix(match: re.Match[str]) -> str:
    """Keep the matched text before the secret body (a diagnostic prefix), mark the rest."""
    body = match.start("body") if match.start("body") >= 0 else match.start() + 4
    return match.group(0)[: body - match.start()] + MARK


def _prefixed_key(match: re.Match[str]) -> str:
    """A prefixed key, unless its body is too short to be one: `sk-` keys from SHORT_BODY
    characters mixing letters and digits (test and legacy keys), others from LONG_BODY."""
    body = match.group("body")
    if len(body) < LONG_BODY:
        is_sk = match.start("sk") >= 0
        chars = set(body)
        mixed = chars & _LETTERS and chars & _DIGITS
        if not (is_sk and len(body) >= SHORT_BODY and mixed):
            return match.group(0)
    return _keep_prefix(match)


def redact_key_blocks(text: str) -> str:
    """`text` with every private-key block (to its END line, or to the end when it was cut)
    replaced by MARK. Run before anything that ends a value at a line break."""
    return _KEY_BLOCK.sub(MARK, text) if "PRIVATE KEY" in text else text


def redact_key_shapes(text: str) -> str:
    """`text` with every credential recognised by its shape replaced by MARK (a prefix
    that names the kind of key is kept); each pattern is skipped after one substring test
    when it cannot apply."""
    if "-" in text:
        for prefix in _DASH_PREFIXES:
            if prefix in text:  # the `in` operator: no call per prefix
                text = _KEY_DASH.sub(_prefixed_key, text)
                break
    if "_" in text:
        text = _KEY_UNDERSCORE.sub(_keep_prefix, text)
    if "A" in text:
        text = _KEY_A.sub(_keep_prefix, text)
    if "ya29." in text:
        text = _KEY_OAUTH.sub(_keep_prefix, text)
    if "Q~" in text:
        text = _AZURE_SECRET.sub(_keep_prefix, text)
    if "SG." in text:
        text = _SENDGRID.sub(_keep_prefix, text)
    if "J" in text and "eyJ" in text:
        text = _JWT.sub(MARK, text)
    if "hooks" in text:  # "webhooks" too
        text = _WEBHOOK.sub(_keep_prefix, text)
    return text
