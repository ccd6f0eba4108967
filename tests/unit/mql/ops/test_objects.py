"""Object operators, field paths, variables, literals, `$let`, `$meta` and Atlas extras."""

from __future__ import annotations

import pytest

from ..test_expression_support import MISSING, Case, Err, case_ids, evaluate, mismatch

DOC = {"o": {"a": 2, "b": 3}, "n": None, "price": 10, "a": 5}
META = {"source": {"type": "kafka", "topic": "t"}}

CASES: list[Case] = [
    # field paths
    ("path", "$price", DOC, 10),
    ("path nested", "$o.a", DOC, 2),
    ("path missing", "$nope", DOC, MISSING),
    ("path through array", "$a.b", {"a": [{"b": 1}, {"c": 2}, {"b": 3}, 5]}, [1, 3]),
    (
        "path nested arrays",
        "$a.b.c",
        {"a": [{"b": [{"c": 1}, {"c": 2}]}, {"b": {"c": 3}}]},
        [[1, 2], 3],
    ),
    ("path numeric is a field", "$a.0", {"a": [10, 20]}, []),
    ("path numeric key", "$a.0", {"a": {"0": 5}}, 5),
    ("path through scalar", "$a.b", {"a": 5}, MISSING),
    ("path skips inner arrays", "$a.b", {"a": [[{"b": 1}]]}, []),
    ("path dotted key needs getField", {"$getField": "a.b"}, {"a.b": 7}, 7),
    ("root", "$$ROOT", {"x": 1}, {"x": 1}),
    ("current path", "$$CURRENT.o.b", DOC, 3),
    ("root path", "$$ROOT.price", DOC, 10),
    ("remove", "$$REMOVE", DOC, MISSING),
    # literals
    ("int literal", 5, {}, 5),
    ("string literal", "abc", {}, "abc"),
    ("literal dollar", {"$literal": "$a"}, DOC, "$a"),
    ("literal operator", {"$literal": {"$add": [1, 2]}}, {}, {"$add": [1, 2]}),
    ("array literal", [1, "$a", "$nope"], DOC, [1, 5, None]),
    ("object literal drops missing", {"x": "$a", "y": "$nope"}, DOC, {"x": 5}),
    ("object literal nested", {"x": {"y": {"$add": ["$a", 1]}}}, DOC, {"x": {"y": 6}}),
    ("object literal keeps null", {"x": "$n"}, DOC, {"x": None}),
    ("date literal", {"$date": "2024-01-01T00:00:00Z"}, {}, {"$date": "2024-01-01T00:00:00.000Z"}),
    ("let", {"$let": {"vars": {"x": 2, "y": "$a"}, "in": {"$multiply": ["$$x", "$$y"]}}}, DOC, 10),
    (
        "let nested shadow",
        {"$let": {"vars": {"x": 1}, "in": {"$let": {"vars": {"x": 2}, "in": "$$x"}}}},
        {},
        2,
    ),
    ("let var path", {"$let": {"vars": {"v": "$o"}, "in": "$$v.b"}}, DOC, 3),
    # meta and Atlas extras
    ("meta stream", {"$meta": "stream"}, {}, META),
    ("meta path", {"$meta": "stream.source.type"}, {}, "kafka"),
    ("meta absent", {"$meta": "stream.window.start"}, {}, MISSING),
    ("currentDate is a date", {"$type": {"$currentDate": {}}}, {}, "date"),
    ("createUUID is a string", {"$strLenCP": {"$createUUID": {}}}, {}, 36),
    # accumulator-style operators
    ("sum args", {"$sum": [1, 2.5, "x"]}, {}, 3.5),
    ("sum array", {"$sum": "$arr"}, {"arr": [1, 2, 3]}, 6),
    ("sum empty", {"$sum": []}, {}, 0),
    ("avg", {"$avg": [1, 2]}, {}, 1.5),
    ("avg no numbers", {"$avg": ["a"]}, {}, None),
    ("max mixed", {"$max": [1, "a", None]}, {}, "a"),
    ("min array", {"$min": "$arr"}, {"arr": [3, 1, 2]}, 1),
    ("max nothing", {"$max": []}, {}, None),
    # objects
    ("mergeObjects", {"$mergeObjects": [{"a": 1}, {"b": 2}]}, {}, {"a": 1, "b": 2}),
    ("mergeObjects later wins", {"$mergeObjects": [{"a": 1}, "$o", "$n"]}, DOC, {"a": 2, "b": 3}),
    ("mergeObjects all null", {"$mergeObjects": ["$n"]}, DOC, {}),
    (
        "mergeObjects int",
        {"$mergeObjects": [{"a": 1}, 5]},
        {},
        Err("$mergeObjects requires object inputs"),
    ),
    ("getField", {"$getField": {"field": "a.b", "input": {"$literal": {"a.b": 5}}}}, {}, 5),
    ("getField current", {"$getField": "price"}, DOC, 10),
    ("getField null input", {"$getField": {"field": "x", "input": "$n"}}, DOC, None),
    ("getField missing input", {"$getField": {"field": "x", "input": "$nope"}}, {}, MISSING),
    ("getField scalar input", {"$getField": {"field": "x", "input": 5}}, {}, MISSING),
    (
        "setField",
        {"$setField": {"field": "c", "input": "$o", "value": 4}},
        DOC,
        {"a": 2, "b": 3, "c": 4},
    ),
    (
        "setField remove",
        {"$setField": {"field": "a", "input": "$o", "value": "$$REMOVE"}},
        DOC,
        {"b": 3},
    ),
    (
        "setField dotted name",
        {"$setField": {"field": "x.y", "input": {}, "value": 1}},
        {},
        {"x.y": 1},
    ),
    (
        "setField scalar",
        {"$setField": {"field": "a", "input": 5, "value": 1}},
        {},
        Err("$setField requires 'input' to evaluate to type Object"),
    ),
    ("setField null", {"$setField": {"field": "a", "input": "$n", "value": 1}}, DOC, None),
    ("unsetField", {"$unsetField": {"field": "a", "input": "$o"}}, DOC, {"b": 3}),
    (
        "objectToArray",
        {"$objectToArray": {"$literal": {"a": 1, "b": [2]}}},
        {},
        [{"k": "a", "v": 1}, {"k": "b", "v": [2]}],
    ),
    ("objectToArray null", {"$objectToArray": "$n"}, DOC, None),
    (
        "objectToArray int",
        {"$objectToArray": 5},
        {},
        Err("$objectToArray requires a document input, found: int"),
    ),
    ("arrayToObject pairs", {"$arrayToObject": [[["a", 1], ["b", 2]]]}, {}, {"a": 1, "b": 2}),
    ("arrayToObject kv", {"$arrayToObject": [[{"k": "a", "v": 1}]]}, {}, {"a": 1}),
    ("arrayToObject last wins", {"$arrayToObject": [[["a", 1], ["a", 3]]]}, {}, {"a": 3}),
    ("arrayToObject empty", {"$arrayToObject": [[]]}, {}, {}),
    (
        "arrayToObject roundtrip",
        {"$arrayToObject": {"$objectToArray": "$o"}},
        DOC,
        {"a": 2, "b": 3},
    ),
    (
        "arrayToObject string",
        {"$arrayToObject": ["x"]},
        {},
        Err("$arrayToObject requires an array input, found: string"),
    ),
    (
        "arrayToObject short pair",
        {"$arrayToObject": [[["a"]]]},
        {},
        Err("$arrayToObject requires an array of size 2 arrays,found array of size: 1"),
    ),
    ("arrayToObject int key", {"$arrayToObject": [[[1, 2]]]}, {}, Err("Found key type: int")),
    (
        "arrayToObject kv count",
        {"$arrayToObject": [[{"k": "a"}]]},
        {},
        Err("Found incorrect number of keys:1"),
    ),
    (
        "arrayToObject bad format",
        {"$arrayToObject": [[5]]},
        {},
        Err("Unrecognised input type format for $arrayToObject: int"),
    ),
]


@pytest.fixture(scope="module")
def outcomes(spark):
    return evaluate(spark, [(c[1], c[2]) for c in CASES], meta=META)


@pytest.mark.spark
@pytest.mark.parametrize("index", range(len(CASES)), ids=case_ids(CASES))
def test_objects(outcomes, index):
    problem = mismatch(outcomes[index], CASES[index][3])
    assert problem is None, problem
