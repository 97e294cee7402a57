"""The shared profile tables keep each document's text once and never grow past their
bound, whatever number of distinct documents passes through them (every Start brings one)."""

from __future__ import annotations

import json

from actors.store.shared_documents import SharedDocuments, SharedTexts


def test_a_document_is_encoded_once_while_its_entry_is_kept() -> None:
    table = SharedTexts(bound=4)
    document = {"candidates": [{"id": "claude"}]}
    encoded: list[object] = []

    def encode(value: object) -> str:
        encoded.append(value)
        return json.dumps(value)

    assert table.text(document, encode) == table.text(document, encode)
    assert encoded == [document]
    # An equal document that is another object is encoded for itself.
    assert table.text(dict(document), encode) == json.dumps(document)
    assert len(encoded) == 2


def test_the_tables_never_hold_more_than_their_bound() -> None:
    texts, documents = SharedTexts(bound=4), SharedDocuments(bound=4)
    kept = [{"n": n} for n in range(25)]  # alive, so no id is reused
    for document in kept:
        text = texts.text(document, json.dumps)
        documents.put(text, document)
        assert len(texts) <= 4
        assert len(documents) <= 4
    assert documents.get(json.dumps(kept[-1])) is kept[-1]
