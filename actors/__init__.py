"""Imperative shell: Redis, rq, Ray and the recovery CLI."""
