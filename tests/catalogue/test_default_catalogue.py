"""The shipped catalogue is built once per process, also when threads ask for it together
(a route host builds it in a thread while a first report may ask for it on the loop)."""

from __future__ import annotations

import threading

import pytest

from catalogue import classifier
from catalogue.classifier import Catalogue
from catalogue.rules import Rule, load_builtin_rules


def test_callers_that_ask_while_it_is_built_wait_for_that_one_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    building = threading.Event()
    release = threading.Event()
    builds: list[int] = []

    def held_rules() -> list[Rule]:
        builds.append(1)
        building.set()
        assert release.wait(30)
        return list(load_builtin_rules())

    monkeypatch.setattr(classifier, "load_builtin_rules", held_rules)
    monkeypatch.setattr(classifier, "_DEFAULT", [])
    found: list[Catalogue] = []
    first = threading.Thread(target=lambda: found.append(classifier.default_catalogue()))
    first.start()
    assert building.wait(30)
    others = [
        threading.Thread(target=lambda: found.append(classifier.default_catalogue()))
        for _ in range(3)
    ]
    for thread in others:
        thread.start()
    release.set()
    for thread in (first, *others):
        thread.join(30)
    assert builds == [1]
    assert len(found) == 4
    assert all(catalogue is found[0] for catalogue in found)
    assert classifier.default_catalogue() is found[0]
