"""`$merge` and `$emit` into `local` writing new documents as their text (`sinks.stored_text`).

The bulk path must leave exactly what the full path (parse, check, decode, encode) leaves:
every test writes the same batches through both, each into its own real SQLite file, and
compares the collections and the DLQ records. The full path is the same store with the text
insert hidden.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from bson import ObjectId

from pipeline_stages._connectors.sinks.collection_writer import CollectionEmitWriter
from pipeline_stages._connectors.sinks.merge_writer import MergeWriter
from pipeline_stages._connectors.sinks.plans import CollectionEmitPlan, MergePlan, Name
from pipeline_stages._connectors.sinks.stored_text import stored_row
from pipeline_stages._stream.batch import BatchResult, Output
from service.stores.sqlite_db import SqliteDatabase
from service.stores.sqlite_documents import SqliteDocumentStore

NOW = datetime(2024, 1, 1, tzinfo=UTC)
DEEP = '{"a":' * 101 + "1" + "}" * 101

#: Texts the bulk path takes.
STORABLE = [
    '{"a":1}',
    "{}",
    '{ "a" : 1 }',
    '{"t":{"$date":"2024-02-29T12:00:00.123Z"},"l":[{"$date":"1970-01-01T00:00:00.000Z"}]}',
    '{"s":"h\\u00e9llo \\"x\\" \\\\ \u2713","k":"\U0001f600"}',
    '{"f":1.5E10,"g":-0.0,"h":5E-324,"i":-9223372036854775,"j":1e308}',
    '{"n":null,"b":true,"l":[1,[2,{"x":"y"}]],"o":{"p":{"q":[]}}}',
    '{"nan":"NaN","inf":"Infinity"}',
    '{"_id":5,"a":1}',
    '{"_id":-0}',
    '{"_id":"k ✓","a":{"b":1}}',
]
#: Texts the full path must judge (and what it makes of them is compared too).
REFUSED = [
    '{"a":{"_id":1}}',
    '{"a":1,"_id":5}',
    '{"_id":5,"a":{"_id":1}}',
    '{"_id":1.5}',
    '{"_id":null}',
    '{"_id":[1]}',
    '{"_id":{"a":1}}',
    '{"_id":"x\\"y"}',
    '{"_id":"$x"}',
    '{"o":{"$oid":"0123456789abcdef01234567"}}',
    '{"d":{"$date":"2024-01-01T00:00:00Z"}}',
    '{"d":{"$date":"2024-01-01T01:00:00.000+01:00"}}',
    '{"d":{"$date":"1969-12-31T23:59:59.999Z"}}',
    '{"d":{"$date":"2024-02-30T00:00:00.000Z"}}',
    '{"d":{"$date":"2024-01-01T00:00:00.000Z","x":1}}',
    '{"s":"\\"$date\\""}',
    '{"s":"{\\"$date\\":\\"2024-01-01T00:00:00.000Z\\"}"}',
    '{"$x":1}',
    '{"big":9223372036854775807}',
    '{"huge":92233720368547758070}',
    '{"s":"\\ud800"}',
    DEEP,
]


def key(n: int) -> str:
    return f"{n:024x}"


def batch(
    batch_id: int,
    texts: list[str],
    keys: list[str] | None = None,
    targets: list[dict[str, Any]] | None = None,
) -> BatchResult:
    keys = keys or [key(1000 * batch_id + i) for i in range(len(texts))]
    result = BatchResult(batch_id=batch_id)
    result.outputs = [
        Output(text, k, target)
        for text, k, target in zip(texts, keys, targets or [None] * len(texts), strict=True)
    ]
    result.order = [("out", i) for i in range(len(texts))]
    return result


class FullPathOnly:
    """The store without `insert_new_texts`: every batch takes the full path."""

    def __init__(self, store: SqliteDocumentStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name == "insert_new_texts":
            raise AttributeError(name)
        return getattr(self._store, name)


class CountedStore(SqliteDocumentStore):
    """The store, counting the batches its text insert took."""

    taken = 0

    def insert_new_texts(self, db: str, coll: str, rows: Any) -> bool:
        took = super().insert_new_texts(db, coll, rows)
        self.taken += took
        return took


class Pair:
    """One writer on each path (a `$merge`, or with `emit` a collection `$emit`), each with
    its own SQLite file, and a count of the batches the bulk path took."""

    def __init__(self, root: Path, *, emit: bool = False, **plan: Any) -> None:
        self.bulk = CountedStore(SqliteDatabase(root / "bulk.db"))
        self.stores = [self.bulk, SqliteDocumentStore(SqliteDatabase(root / "full.db"))]
        stores = (self.bulk, FullPathOnly(self.stores[1]))
        if emit:
            self.writers: list[Any] = [
                CollectionEmitWriter(
                    CollectionEmitPlan("local", "Local", Name("d"), Name("out")),
                    open_store=lambda s=store: s,
                    open_client=None,
                    processor="p",
                    embedded=True,
                    clock=lambda: NOW,
                )
                for store in stores
            ]
            return
        fields = {"connection": "local", "connection_type": "Local", "db": Name("d")}
        fields.update({"coll": Name("out"), **plan})
        self.writers = [
            MergeWriter(
                MergePlan(**fields),
                open_store=lambda s=store: s,
                processor="p",
                embedded=True,
                clock=lambda: NOW,
            )
            for store in stores
        ]

    @property
    def bulk_batches(self) -> int:
        return self.bulk.taken

    def write(self, result: BatchResult) -> list[dict[str, Any]]:
        bulk, full = (writer.write(result) for writer in self.writers)
        assert bulk == full
        return bulk

    def collections(self) -> list[list[dict[str, Any]]]:
        return [store.find("d", "out") for store in self.stores]


def takes(text: str) -> bool:
    return stored_row(text, key(1)) is not None


def test_the_texts_the_bulk_path_takes():
    assert all(takes(text) for text in STORABLE)
    assert not any(takes(text) for text in REFUSED)
    assert stored_row('{"a":2}', "not hex") is None  # a key that is no ObjectId
    assert stored_row('{"a":2}', key(1)) == (
        '{"$oid":"' + key(1) + '"}',
        '{"_id":{"$oid":"' + key(1) + '"},"a":2}',
    )


@pytest.mark.parametrize("emit", [False, True], ids=["merge", "emit"])
@pytest.mark.parametrize("text", STORABLE + REFUSED)
def test_one_document_is_stored_as_the_full_path_stores_it(tmp_path, text, emit):
    pair = Pair(tmp_path, emit=emit)
    dlq = pair.write(batch(1, [text]))
    bulk, full = pair.collections()
    assert bulk == full
    assert pair.bulk_batches == (1 if takes(text) else 0)
    if takes(text):
        assert dlq == []
        own = json.loads(text).get("_id", ObjectId(key(1000)))
        assert list(bulk[0].items())[0] == ("_id", own)


@pytest.mark.parametrize("emit", [False, True], ids=["merge", "emit"])
def test_a_batch_keeps_its_order_and_a_replay_changes_nothing(tmp_path, emit):
    pair = Pair(tmp_path, emit=emit)
    texts = [
        json.dumps(
            {"n": n, "t": {"$date": f"2024-01-01T00:00:{n % 60:02d}.000Z"}},
            separators=(",", ":"),  # as Spark's `to_json` writes
        )
        for n in range(700)
    ]
    assert pair.write(batch(1, texts)) == []
    assert pair.bulk_batches == 1
    bulk, full = pair.collections()
    assert bulk == full
    assert [doc["n"] for doc in bulk] == list(range(700))
    assert pair.write(batch(1, texts)) == []  # Spark replays the batch: the ids are stored
    assert pair.bulk_batches == 1
    assert pair.collections() == [bulk, full]


def test_a_batch_with_one_refused_text_takes_the_full_path_whole(tmp_path):
    pair = Pair(tmp_path)
    dlq = pair.write(batch(1, ['{"a":1}', '{"s":"\\ud800"}', '{"a":3}']))
    assert [record["doc"] for record in dlq] == [{"s": "\ud800"}]
    assert pair.bulk_batches == 0
    bulk, full = pair.collections()
    assert bulk == full
    assert [doc["a"] for doc in bulk] == [1, 3]


def test_stored_ids_repeated_keys_and_unique_indexes_take_the_full_path(tmp_path):
    pair = Pair(tmp_path)
    pair.write(batch(1, ['{"a":1}'], [key(7)]))
    # A stored id: `whenMatched: merge` keeps the stored fields.
    pair.write(batch(2, ['{"b":2}', '{"c":3}'], [key(7), key(8)]))
    # A key twice in one batch: the second is another document (`effective_keys`), and both
    # are new.
    pair.write(batch(3, ['{"d":4}', '{"d":5}'], [key(9), key(9)]))
    assert pair.bulk_batches == 2
    bulk, full = pair.collections()
    assert bulk == full
    assert [{k: v for k, v in doc.items() if k != "_id"} for doc in bulk] == [
        {"a": 1, "b": 2},
        {"c": 3},
        {"d": 4},
        {"d": 5},
    ]


def test_a_collection_with_a_unique_index_takes_the_full_path(tmp_path):
    pair = Pair(tmp_path)
    for store in pair.stores:
        store.ensure_unique_index("d", "out", ["d"])
    dlq = pair.write(batch(1, ['{"d":6}', '{"d":6}']))
    assert pair.bulk_batches == 0
    assert [record["doc"] for record in dlq] == [{"d": 6}]  # refused by the index
    bulk, full = pair.collections()
    assert bulk == full
    assert len(bulk) == 1


@pytest.mark.parametrize(
    "plan",
    [
        {"when_not_matched": "discard"},
        {"when_matched": "replace"},
        {"coll": Name.of("$c", "into", "coll")},
    ],
)
def test_other_merge_options_give_what_the_full_path_gives(tmp_path, plan):
    pair = Pair(tmp_path, **plan)
    texts = ['{"a":1,"c":"x"}', '{"a":2,"c":"y"}']
    pair.write(batch(1, texts, targets=[{"coll": "x"}, {"coll": "y"}]))
    pair.write(batch(2, ['{"a":3,"c":"x"}'], [key(1000)], targets=[{"coll": "x"}]))
    assert pair.bulk_batches == (1 if plan == {"when_matched": "replace"} else 0)
    for coll in ("out", "x", "y"):
        assert pair.stores[0].find("d", coll) == pair.stores[1].find("d", coll)


def test_the_store_inserts_nothing_of_rows_that_repeat_an_id(tmp_path):
    store = SqliteDocumentStore(SqliteDatabase(tmp_path / "s.db"))
    oid = '{"$oid":"' + key(1) + '"}'
    rows = [(oid, '{"_id":' + oid + ',"a":1}'), (oid, '{"_id":' + oid + ',"a":2}')]
    assert not store.insert_new_texts("d", "out", rows)
    assert not store.insert_new_texts("d", "out", [("1", '{"_id":1}'), ("1.0", '{"_id":1.0}')])
    assert store.find("d", "out") == []
    rows = [row for row in (stored_row('{"a":1}', key(1)), stored_row("{}", key(2))) if row]
    assert store.insert_new_texts("d", "out", rows)
    assert store.find("d", "out") == [{"_id": ObjectId(key(1)), "a": 1}, {"_id": ObjectId(key(2))}]
    # An id stored under another spelling (1 == 1.0 for MongoDB) is found.
    store.merge("d", "own", [{"_id": 1.0}])
    assert not store.insert_new_texts("d", "own", [("1", '{"_id":1,"a":1}')])


@pytest.mark.parametrize(
    "own_id", ["5", "-0", "-12", '"k"', '"k \u2713"', '"1:2:3"', '"a b"', '"1"']
)
def test_a_document_inserted_as_text_is_found_by_its_id_again(tmp_path, own_id):
    """The key a text insert stores for an `_id` is the one every later write looks up: a
    replay, and a `merge` of the same `_id` spelled another way (`-0` is `0`)."""
    pair = Pair(tmp_path)
    text = '{"_id":' + own_id + ',"a":1}'
    assert pair.write(batch(1, [text])) == []
    assert pair.bulk_batches == 1
    assert pair.write(batch(1, [text])) == []
    assert pair.write(batch(2, [json.dumps({"_id": json.loads(own_id), "b": 2})])) == []
    assert pair.bulk_batches == 1
    bulk, full = pair.collections()
    assert bulk == full == [{"_id": json.loads(own_id), "a": 1, "b": 2}]
