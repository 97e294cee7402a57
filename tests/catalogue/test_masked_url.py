"""masked_url: the one form in which the project prints a URL."""

from __future__ import annotations

import pytest

from catalogue.sanitize import masked_url, sanitize

MASKED = [
    ("redis://:s3cr3t@db:6379/0", "redis://:***@db:6379/0"),
    ("redis://user:s3cr3t@db:6379/0", "redis://user:***@db:6379/0"),
    ("rediss://default:p%40ss@db.example.com:6380", "rediss://default:***@db.example.com:6380"),
    ("redis://:p@ss@db:6379", "redis://:***@db:6379"),
    ("rediss://tok3n@db:6380/1", "rediss://***@db:6380/1"),
    ("unix://:s3cr3t@/var/run/redis.sock", "unix://:***@/var/run/redis.sock"),
    ("unix:///run/r.sock?db=0&password=s3cr3t", "unix:///run/r.sock?db=0&password=***"),
    ("redis://db:6379/0?password=s3cr3t&db=2", "redis://db:6379/0?password=***&db=2"),
    ("redis//:s3cr3t@db:6379", "***@db:6379"),  # mistyped: all before the "@" masked
]
UNCHANGED = ["redis://db:6379/0", "unix:///tmp/x/redis.sock", "redis://127.0.0.1:1/0?db=3"]


@pytest.mark.parametrize(("url", "expected"), MASKED)
def test_the_password_is_masked_and_the_rest_kept(url: str, expected: str) -> None:
    assert masked_url(url) == expected
    if "?" not in url:  # masked user info is left as it is (a query is redacted whole)
        assert sanitize(expected) == expected


@pytest.mark.parametrize("url", UNCHANGED)
def test_a_url_without_credentials_is_unchanged(url: str) -> None:
    assert masked_url(url) == url


def test_text_that_is_no_url_is_sanitised() -> None:
    assert masked_url("http://[::1 password=hunter2") == "http://[::1 password=[REDACTED]"
