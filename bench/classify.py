"""Classifier cost per evidence (docs/CONTRACTS.md, Benchmarks).

One `classify()` call on a parsed Evidence, sanitising included, timed per call:
- over the development corpus (median, p99, and process CPU time per call),
- over 4 KiB worst-case inputs (every rule keyword at once, wrapped JSON, repetitions),
- and with the rule set doubled by distinct synthetic rules that never match, measured
  interleaved with the base set in the same run so machine noise cancels in the ratio.
Prints one JSON line.
"""

from __future__ import annotations

import gc
import json
import random
import statistics
import sys
import time
from datetime import UTC, datetime

from catalogue import Catalogue, Evidence, EvidenceKind, default_catalogue
from catalogue.corpus import dev_corpus, evidence_from_row
from catalogue.rules import Rule, parse_rule

CORPUS = dev_corpus()
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
ROUNDS = 40
KIB4 = 4096


def synthetic_rules(base: list[Rule]) -> list[Rule]:
    """As many distinct rules as `base`, with literals that never occur in real errors."""
    out = []
    for number, rule in enumerate(base):
        word = f"zqsynth{number}x"
        raw = {
            "id": f"synthetic.rule{number}.v1",
            "code": rule.code,
            "tier": rule.tier.name.lower(),
            "keys": [word, f"{word}y"],
            "match": [f"\\b{word} (?:alpha|beta) \\d+", f"{word}y [a-z]+ limit"],
            "why": "synthetic rule for the doubling benchmark",
        }
        out.append(parse_rule(raw, "synthetic"))
    return out


def worst_case_inputs(catalogue: Catalogue, corpus: list[Evidence]) -> list[Evidence]:
    keys = sorted({k for rule in catalogue.rules for k in rule.keys})
    every_key = " ".join(keys)
    texts = [
        (every_key + " ") * (KIB4 // (len(every_key) + 1) + 1),
        "\n".join(e.combined_text() for e in corpus),
        ('API Error: 529 {"type":"error","error":{"type":"api_\n    error"}} ') * 80,
        "stream disconnected before completion: " * 110,
        "rate limit " * 400,
        "".join(random.Random(7).choice('abc XYZ:/{}"\n0123') for _ in range(KIB4)),
    ]
    out = []
    for text in texts:
        clipped = text.encode("utf-8")[:KIB4].decode("utf-8", errors="ignore")
        out.append(Evidence(kind=EvidenceKind.STDERR, text=clipped, http_status=429))
        out.append(Evidence(kind=EvidenceKind.MESSAGE_CHUNK, text=clipped))
    return out


def time_calls(
    catalogue: Catalogue, inputs: list[Evidence], samples: list[float], cpu: list[int] | None = None
) -> None:
    """Wall time per call into `samples` (µs); the batch's process CPU time into `cpu` (ns)."""
    classify = catalogue.classify
    clock = time.perf_counter_ns
    cpu_started = time.process_time_ns()
    for evidence in inputs:
        started = clock()
        classify(evidence, NOW)
        samples.append((clock() - started) / 1000)
    if cpu is not None:
        cpu.append(time.process_time_ns() - cpu_started)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> int:
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line]
    corpus = [evidence_from_row(row) for row in rows]
    base = default_catalogue()
    doubled = Catalogue(list(base.rules) + synthetic_rules(list(base.rules)))
    worst = worst_case_inputs(base, corpus)

    for catalogue in (base, doubled):  # warm regex caches and lazy imports
        time_calls(catalogue, corpus + worst, [])
    gc.collect()
    gc.freeze()

    base_samples: list[float] = []
    doubled_samples: list[float] = []
    worst_samples: list[float] = []
    base_cpu: list[int] = []
    for _ in range(ROUNDS):
        time_calls(base, corpus, base_samples, base_cpu)
        time_calls(doubled, corpus, doubled_samples)
        time_calls(base, worst, worst_samples)

    median = statistics.median(base_samples)
    print(
        json.dumps(
            {
                "evidence": len(corpus),
                "rounds": ROUNDS,
                "rules": len(base.rules),
                "median_us": round(median, 2),
                "p99_us": round(percentile(base_samples, 0.99), 2),
                "cpu_us_per_op": round(sum(base_cpu) / 1000 / len(base_samples), 2),
                "worst_4k_median_us": round(statistics.median(worst_samples), 2),
                "worst_4k_p99_us": round(percentile(worst_samples, 0.99), 2),
                "doubled_rules": len(doubled.rules),
                "doubled_median_us": round(statistics.median(doubled_samples), 2),
                "rule_doubling_growth": round(statistics.median(doubled_samples) / median, 3),
                "python": sys.version.split()[0],
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
