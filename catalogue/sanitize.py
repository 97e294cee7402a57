"""Bounded, redacted excerpts of provider error text: the ``safe_excerpt``. Pure, stdlib only.

``sanitize`` strips control characters, collapses blank-line runs, redacts credentials,
e-mail addresses and user names in home paths, and cuts the result to at most
``MAX_EXCERPT_BYTES`` of UTF-8. It is idempotent: replacement markers never match a
pattern again, and a truncated excerpt is only returned once it is a fixed point.
Every pattern is linear (no nested quantifiers over overlapping classes) and sits behind a
cheap substring check, because this runs inside every classification.
"""

from __future__ import annotations

import re

__all__ = ["MAX_EXCERPT_BYTES", "sanitize"]

MAX_EXCERPT_BYTES = 4096

_ELLIPSIS = "…"
_MARK = "[REDACTED]"
_EMAIL_MARK = "[EMAIL]"
# Inputs are cut to this many characters before any regex runs; the partial token at the
# cut is dropped so a secret straddling it cannot survive as an unrecognisable fragment.
_PRECUT_CHARS = 16 * 1024
_BUDGET = MAX_EXCERPT_BYTES - len(_ELLIPSIS.encode())

# ANSI CSI / OSC sequences, C0/C1 controls except \t and \n, bidi overrides, lone surrogates.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]*\x07?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_BLANK_LINES = re.compile(r"\n(?:[ \t]*\n){3,}")
# A run of characters that could belong to one token (reversed text is matched from 0).
_TOKEN_RUN = re.compile(r"[^\s\"'`,;()\[\]{}<>]*")

_PEM = re.compile(
    r"-----BEGIN [A-Z ]{0,24}PRIVATE KEY-----.*?(?:-----END [A-Z ]{0,24}PRIVATE KEY-----|\Z)",
    re.DOTALL,
)

# Key names: an optional run of `word_` / `word-` segments, then a secret-ish word, then the
# separator. The look-behind lets a name start only at the start of its run (linear).
_NAME_START = r"(?<![\w-])-{0,2}(?:[A-Za-z0-9]+[_-])*?"
_SEP = r"(?P<sep>(?:\\?[\"'])?[ \t]*[:=][ \t]*|\\?[\"'][ \t]*,[ \t]*)"
_QUOTED = r"b?\"(?P<dq>(?:[^\"\\\n]|\\.)*)|b?'(?P<sq>(?:[^'\\\n]|\\.)*)|\\\"(?P<eq>[^\\\"\n]*)"
_HEADER = re.compile(
    _NAME_START + r"(?:authorization|cookie)" + _SEP + r"(?:" + _QUOTED + r"|(?P<bare>[^\s…][^\r\n]*))",
    re.IGNORECASE,
)
_ASSIGN = re.compile(
    _NAME_START
    + r"(?:(?:access|refresh|auth|session|id|bearer|client|api)[_-]?token|token"
    r"|(?:client[_-]?|app[_-]?)?secret|(?:secret[_-]?)?access[_-]?key|secret[_-]?key"
    r"|private[_-]?key|api[_-]?key|password|passwd|passphrase)"
    + _SEP
    + r"(?:"
    + _QUOTED
    + r"|(?P<bare>[^\s…\"'`,;&<>()\[\]{}\\][^\s\"'`,;&<>()\[\]{}\\]*))",
    re.IGNORECASE,
)
# A long opaque value after a secret-ish word in prose ("Invalid API key 3f9c…").
_GENERIC = re.compile(
    r"\b(?:api[ _-]?key|access[ _-]?key|secret|token|password|credential)s?\b[^\w\n]{1,4}"
    r"(?P<v>[A-Za-z0-9+/_.=-]{20,})",
    re.IGNORECASE,
)
_BEARER = re.compile(
    r"\b(?P<scheme>bearer|basic)[ \t]+(?P<v>[A-Za-z0-9._~+/=-]+)", re.IGNORECASE
)
_NOT_TOKENS = frozenset(
    "token tokens auth authentication authorization scheme header credential credentials "
    "realm required is was missing invalid expired".split()
)

_KEYS = re.compile(
    r"\b(?P<p>sk-ant-(?:[a-z]{2,8}\d{2}-)?|sk-or-v1-|sk-(?:proj|svcacct|admin)-|sk-|gsk_"
    r"|xai-|gh[pousr]_|github_pat_|hf_|r8_|pplx-|xox[abposr]-|[sr]k_(?:live|test)_|ya29\.|AIza)"
    r"[A-Za-z0-9_-]{20,}"
    r"|\b(?P<aws>AKIA|ASIA)[A-Z0-9]{16,}"
    r"|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*)?"
)
_KEY_HINTS = (
    "sk-", "k_live_", "k_test_", "gsk_", "xai-", "gh", "hf_", "r8_", "pplx-", "xox",
    "ya29.", "AIza", "AKIA", "ASIA", "eyJ",
)  # fmt: skip

_SCHEME = r"\b[A-Za-z][A-Za-z0-9+.-]{0,15}://"
_USERINFO = re.compile(r"(?P<pre>" + _SCHEME + r")(?P<v>[^\s/?#@\"'<>]+)@")
_QUERY = re.compile(r"(?P<pre>" + _SCHEME + r"[^\s?#\"'<>]*\?)(?P<v>[^\s…#\"'<>)][^\s#\"'<>)]*)")
_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}(?![A-Za-z0-9-])"
)
_HOME = re.compile(
    r"(?<![\w.~-])(?:(?:/home|/Users|[A-Za-z]:[\\/]{1,2}Users)[\\/]{1,2}[^/\\\s\"'<>:]+"
    r"|/root(?![\w.-]))"
)


def _replace_value(match: re.Match[str], *groups: str) -> str:
    """Replace the first participating value group of `match` by the marker."""
    for group in groups:
        value = match.group(group)
        if value is None:
            continue
        if not value or value == _MARK:
            return match.group(0)
        whole, base = match.group(0), match.start()
        return whole[: match.start(group) - base] + _MARK + whole[match.end(group) - base :]
    return match.group(0)


def _header_or_assignment(match: re.Match[str]) -> str:
    return _replace_value(match, "dq", "sq", "eq", "bare")


def _generic(match: re.Match[str]) -> str:
    value = match.group("v")
    if not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
        return match.group(0)
    return _replace_value(match, "v")


def _bearer(match: re.Match[str]) -> str:
    token = match.group("v")
    if token.lower() in _NOT_TOKENS:
        return match.group(0)
    if match.group("scheme").lower() == "basic" and (
        len(token) < 8 or (token.isalpha() and token[1:].islower())
    ):
        return match.group(0)  # prose such as "Basic authentication", not a credential
    return _replace_value(match, "v")


def _key(match: re.Match[str]) -> str:
    prefix = match.group("p") or match.group("aws") or ""
    return prefix + _MARK


def _url_part(match: re.Match[str]) -> str:
    return _replace_value(match, "v")


def _redact(text: str) -> str:
    """Apply every redaction whose cheap precheck passes; idempotent by construction."""
    low = text.lower()
    if "private key-----" in low:
        text = _PEM.sub(_MARK, text)
    if "authorization" in low or "cookie" in low:
        text = _HEADER.sub(_header_or_assignment, text)
    if "token" in low or "key" in low or "secret" in low or "pass" in low:
        text = _ASSIGN.sub(_header_or_assignment, text)
        text = _GENERIC.sub(_generic, text)
    if "bearer" in low or "basic" in low:
        text = _BEARER.sub(_bearer, text)
    if "://" in text:
        if "@" in text:
            text = _USERINFO.sub(_url_part, text)
        if "?" in text:
            text = _QUERY.sub(_url_part, text)
    if any(hint in text for hint in _KEY_HINTS):
        text = _KEYS.sub(_key, text)
    if "@" in text:
        text = _EMAIL.sub(_EMAIL_MARK, text)
    if "/home/" in text or "Users" in text or "/root" in text:
        text = _HOME.sub("~", text)
    return text


def _drop_partial_token(text: str) -> str:
    """Drop the trailing run of token characters (a possibly cut secret or marker)."""
    run = _TOKEN_RUN.match(text[::-1])
    return text[: len(text) - run.end()] if run else text


def _truncate(text: str, cut_before: bool) -> str:
    """Cut to the byte budget and end with the ellipsis, returning only a fixed point."""
    encoded = text.encode("utf-8")
    head = encoded[:_BUDGET].decode("utf-8", "ignore")
    if len(encoded) > _BUDGET or not cut_before:
        head = _drop_partial_token(head)
    for _ in range(8):
        candidate = head + _ELLIPSIS
        if _redact(candidate) == candidate:
            return candidate
        head = _drop_partial_token(head[:-1])
    return _ELLIPSIS


def sanitize(text: str) -> str:
    """Return the bounded, redacted excerpt of `text` (≤ MAX_EXCERPT_BYTES of UTF-8)."""
    cut = len(text) > _PRECUT_CHARS
    if cut:
        text = _drop_partial_token(text[:_PRECUT_CHARS])
    if not text.isprintable():
        text = _CONTROL.sub("", text)
        if text.count("\n") > 3:
            text = _BLANK_LINES.sub("\n\n\n", text)
    text = _redact(text)
    if cut or len(text) * 4 > MAX_EXCERPT_BYTES and len(text.encode("utf-8")) > MAX_EXCERPT_BYTES:
        return _truncate(text, cut)
    return text
