"""A retraction's restamp (`pane_firing.restamp`) replaces the pane as text when it can, and
must give exactly what decoding, setting the pane and re-encoding gives."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from pipeline_stages._windowing.runtime.pane_firing import restamp
from pipeline_stages._windowing.runtime.values import decode_json, encode

PANE = {"index": 3, "timing": "EARLY"}
NEW = {"index": 4, "timing": "LATE", "retraction": True}
WINDOW = {
    "start": datetime(2024, 1, 1, tzinfo=UTC),
    "end": datetime(2024, 1, 1, 0, 0, 10, tzinfo=UTC),
    "pane": PANE,
}


def result(**fields: Any) -> dict[str, Any]:
    meta = {"source": {"type": "kafka"}, "window": dict(WINDOW)}
    return {"_id": fields.pop("_id", "k"), "_stream_meta": meta, **fields}


def decoded_restamp(doc: dict[str, Any], field: str = "_stream_meta") -> str:
    value = decode_json(encode(doc))
    value[field]["window"]["pane"] = NEW
    return encode(value)


@pytest.mark.parametrize(
    "doc",
    [
        result(n=2.5, xs=[1, 2.0, "a"], when=datetime(2024, 5, 1, tzinfo=UTC)),
        result(_id={"a": [1, {"b": None}]}, nested={"pane": "not an object"}),
        # The user's own data holds the same pane text: decoded, only the metadata changes.
        result(copy={"pane": PANE}),
        result(_id={"window": {"pane": PANE}}),
    ],
)
def test_restamp_is_decode_set_encode(doc: dict[str, Any]) -> None:
    assert restamp(encode(doc), NEW, field="_stream_meta") == decoded_restamp(doc)
    meta = encode(doc["_stream_meta"])
    restamped = encode({**doc["_stream_meta"], "window": {**WINDOW, "pane": NEW}})
    assert restamp(meta, NEW, field=None) == restamped


def test_the_stream_metadata_field_is_the_sources() -> None:
    doc = result(copy={"pane": PANE})
    doc["meta"] = doc.pop("_stream_meta")
    assert restamp(encode(doc), NEW, field="meta") == decoded_restamp(doc, "meta")


def test_a_document_without_stream_metadata_is_unchanged() -> None:
    text = encode({"_id": 1, "n": 2})
    assert restamp(text, NEW, field="_stream_meta") == text
    assert restamp(encode(result()), NEW, field="") == encode(result())
