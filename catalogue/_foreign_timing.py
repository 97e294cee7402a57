"""Delays stated in non-English UI text with English units ("请在 30s 后重试",
"Réessayez dans 45s", "Bitte in 2m30s erneut versuchen").

Relays and localised agents wrap a provider's delay in their own language but keep the
provider's number and unit. Only the phrases that ask the *caller* to retry or wait are
read; a client announcing its own retry ("将在 30s 后自动重试": it will retry by itself) is
a countdown, not a hint. The duration itself is read by `catalogue._durations`, so English
units count; a unit in another script ("30 秒") only where the caller is asked to retry
after it ("请 117 秒后重试": please retry in 117 seconds), never in a status line ("冷却中: 剩余
30 秒": cooling down, 30 s left) nor in a proxy's log of its own retry ("15秒后重试").

Every pattern is a fixed phrase next to a bounded duration: matching is linear. Expects
lowercased text; returns None rather than raising.
"""

from __future__ import annotations

import re

from catalogue._durations import read_full_duration

# Words one of which any foreign retry or wait phrase below contains: without them, none
# of the patterns is tried (most error texts are English).
HINT_WORDS = (
    "后", "後", "후", "等待", "冷却", "réessa", "patient", "attende", "nuevo", "reintent",
    "espera", "novamente", "aguarde", "erneut", "nochmal", "warte", "через", "подожд",
)  # fmt: skip
# The ones an ASCII text can hold: the others are not looked for in one (most error texts
# are ASCII, and each substring test is a C call).
_ASCII_HINT_WORDS = tuple(word for word in HINT_WORDS if word.isascii())

# A number and an English unit, as `read_duration` reads them (validated there).
_DURATION = r"\d{1,12}(?:\.\d{1,12})?\s*[a-zµμ]{1,12}"
_RUN = rf"{_DURATION}(?:[\s,]{{0,3}}{_DURATION}){{0,6}}"

# A phrase before the delay: "retry in/after", "wait", "cooldown".
_BEFORE = re.compile(
    r"(?<![^\W\d_])(?:"
    r"réessa\w{0,6}\s+dans|veuillez\s+patienter|patientez|attendez"  # fr
    r"|(?:inténtal[oe]|intental[oe]|inténtelo|intente|vuelv[ae]\s+a\s+intentarlo)"
    r"(?:\s+de\s+nuevo)?\s+en|reintent\w{0,4}\s+en|espera(?:r|\s+unos)?"  # es
    r"|tente\s+novamente\s+em|aguarde"  # pt
    r"|warte[n]?|bitte\s+warten"  # de
    r"|повторите(?:\s+попытку)?\s+через|подождите"  # ru
    r"|请?等待|冷却中?"  # zh
    r")[\s:：]{0,3}(?:~\s*|environ\s+|unos\s+|cerca\s+de\s+|около\s+|约\s*)?"
    rf"(?P<run>{_RUN})"
)
# A delay followed by "after, retry" (zh, ja, ko) or "in <delay> again" (de).
_AFTER = re.compile(
    rf"(?P<run>{_RUN})\s{{0,2}}(?:(?:之后|以后|后|後)(?:に)?\s{{0,2}}(?:再|请)?\s{{0,2}}"
    r"(?:重试|再试|重新尝试|再次尝试|再試行|重試|再度お試し|恢复|重置)"
    r"|후에?\s{0,2}다시)"
)
_DE_AGAIN = re.compile(
    rf"(?<![^\W\d_])(?:in|nach)\s+(?P<run>{_RUN})\s+(?:erneut|nochmal|noch\s+einmal|wieder)\b"
)
# "Please retry in <n> <unit>" with a Chinese unit (a relay's 429: "所有账号均已达速率限制，请
# 117 秒后重试", dwgx/WindsurfAPI#66): the 请 is what makes it the caller's to wait.
_ZH_PLEASE_RETRY = re.compile(
    r"请\s{0,2}(?:在\s{0,2})?(?P<number>\d{1,7})\s{0,2}(?P<unit>秒钟?|分钟|分|小时|小時)"
    r"\s{0,2}(?:之后|以后|后|後)\s{0,2}再?\s{0,2}(?:重试|再试|重新尝试|再次尝试|重試|尝试)"
)
_ZH_UNIT_SECONDS = {"秒": 1, "秒钟": 1, "分钟": 60, "分": 60, "小时": 3600, "小時": 3600}
# The client announcing its own retry: "将在 30s 后自动重试", "正在重试", "自动重试".
_CLIENT_SIDE = re.compile(r"将|正在|自动|自動|자동")


def foreign_delay(t: str) -> tuple[float, int] | None:
    """(seconds, position) of the first delay a non-English retry or wait phrase states,
    or None."""
    for word in _ASCII_HINT_WORDS if t.isascii() else HINT_WORDS:
        if word in t:  # the `in` operator: cheaper than calling __contains__ through any()
            break
    else:
        return None
    found: list[tuple[int, float]] = []
    for pattern in (_BEFORE, _AFTER, _DE_AGAIN):
        for match in pattern.finditer(t):
            start = match.start("run")
            if pattern is _AFTER and _CLIENT_SIDE.search(t, max(0, start - 8), match.end()):
                continue
            # The run alone: a unit may touch the next word in a script without spaces
            # ("30s後に再試行"), and every part of the run must be a duration.
            seconds = read_full_duration(match["run"])
            if seconds is not None:
                found.append((match.start(), seconds))
    if not t.isascii():
        for match in _ZH_PLEASE_RETRY.finditer(t):
            seconds = int(match["number"]) * _ZH_UNIT_SECONDS[match["unit"]]
            found.append((match.start(), float(seconds)))
    if not found:
        return None
    position, seconds = min(found)
    return seconds, position
