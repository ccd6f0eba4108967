"""Value codec, secret redaction and store-URL selection (shared by every store)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from bson import ObjectId

from service.stores import (
    InvalidDocument,
    InvalidQuery,
    from_relaxed_ejson,
    open_stores,
    to_relaxed_ejson,
)
from service.stores.codec import canonical_key, from_storage_json, normalize_filter, to_storage_json
from service.stores.factory import default_store_url
from service.stores.redact import redact
from service.stores.sqlite import SqliteStores

T = datetime(2024, 5, 1, 12, 30, 0, 123000, tzinfo=UTC)


def test_storage_json_is_relaxed_ejson():
    oid = ObjectId("65f0c0ffee0123456789abcd")
    text = to_storage_json({"t": T, "o": oid, "b": b"\x01", "n": [1, 1.0, None, True]})
    assert json.loads(text) == {
        "t": {"$date": "2024-05-01T12:30:00.123Z"},
        "o": {"$oid": "65f0c0ffee0123456789abcd"},
        "b": {"$binary": {"base64": "AQ==", "subType": "00"}},
        "n": [1, 1.0, None, True],
    }
    assert from_storage_json(text) == {"t": T, "o": oid, "b": b"\x01", "n": [1, 1.0, None, True]}


def test_dates_outside_1970_to_9999_use_number_long():
    old = datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
    assert to_relaxed_ejson(old) == {"$date": {"$numberLong": "-1"}}
    assert from_relaxed_ejson({"$date": {"$numberLong": "-1"}}) == old


def test_relaxed_ejson_input_with_offsets_is_normalised_to_utc():
    parsed = from_relaxed_ejson({"a": [{"$date": "2024-05-01T14:30:00.123456+02:00"}]})
    assert parsed == {"a": [T]} and parsed["a"][0].tzinfo is UTC


def test_objects_that_only_look_like_ejson_are_left_alone():
    assert from_relaxed_ejson({"$oid": "nothex"}) == {"$oid": "nothex"}
    assert from_relaxed_ejson({"$date": "2024-01-01T00:00:00"}) == {"$date": "2024-01-01T00:00:00"}
    assert from_relaxed_ejson({"$date": "x", "other": 1}) == {"$date": "x", "other": 1}


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"a": {"b": [datetime(2024, 1, 1)]}}, "/a/b/0"),  # noqa: DTZ001 - naive on purpose
        ({"a": {1, 2}}, "/a"),
        ({"a": {1: "x"}}, "/a"),
    ],
)
def test_invalid_values_are_reported_with_their_path(value, path):
    with pytest.raises(InvalidDocument) as err:
        to_storage_json(value)
    assert err.value.path == path


def test_canonical_keys_follow_mongodb_equality():
    assert canonical_key(1) == canonical_key(1.0)
    assert canonical_key(True) != canonical_key(1)
    assert canonical_key("1") != canonical_key(1)
    assert canonical_key({"a": 1, "b": 2}) != canonical_key({"b": 2, "a": 1})
    plus2 = timezone(timedelta(hours=2))
    assert canonical_key(T) == canonical_key(T.astimezone(plus2))


def test_filters_reject_javascript_operators_at_any_depth():
    with pytest.raises(InvalidQuery) as err:
        normalize_filter({"$and": [{"a": 1}, {"$expr": {"$function": {}}}]})
    assert err.value.path == "/filter/$and/1/$expr/$function"
    assert normalize_filter(None) == {}


def test_redact_covers_the_usual_secret_spellings():
    config = {
        "password": "x",
        "Sasl.Password": "x",
        "ssl.key.password": "x",
        "sasl.jaas.config": "x",
        "sasl.oauthbearer.client.secret": "x",
        "headers": {"Authorization": "Bearer x", "X-Api-Key": "x", "Accept": "json"},
        "authentication": {
            "mechanism": "SCRAM-SHA-256",
            "username": "u",
            "password": "x",
            "token": "x",
        },
        "servers": ["kafka://u:pw@h:9092", "h2:9092"],
        "url": "https://user:pw@example.com/path",
        "keep": {"ssl.key.location": "/etc/k.pem", "keyFormat": "string"},
    }
    assert redact(config) == {
        "headers": {"Accept": "json"},
        "authentication": {"mechanism": "SCRAM-SHA-256", "username": "u"},
        "servers": ["kafka://u@h:9092", "h2:9092"],
        "url": "https://user@example.com/path",
        "keep": {"ssl.key.location": "/etc/k.pem", "keyFormat": "string"},
    }


def test_default_url_is_sqlite_under_the_data_dir(tmp_path):
    assert default_store_url(tmp_path) == f"sqlite:///{tmp_path}/sluice.db"
    stores = open_stores(data_dir=tmp_path)
    try:
        assert isinstance(stores, SqliteStores)
        assert (tmp_path / "sluice.db").exists()
    finally:
        stores.close()


def test_sqlite_urls_take_relative_and_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for url, expected in [
        ("sqlite:///rel/x.db", tmp_path / "rel/x.db"),
        (f"sqlite:///{tmp_path}/abs.db", tmp_path / "abs.db"),
    ]:
        stores = open_stores(url)
        stores.close()
        assert expected.exists()


@pytest.mark.parametrize("url", ["postgres://h/db", "sqlite://", "sqlite:///", "file:///x"])
def test_unsupported_urls_are_refused(url):
    with pytest.raises(ValueError):
        open_stores(url)
