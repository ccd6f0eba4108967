"""`$group` accumulators: MongoDB semantics, and merge(partials) == add-all for every one."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import pytest
from bson import Int64
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline_stages._documents.values import MISSING, MqlError, mql_type, to_datetime_ms, to_ejson
from pipeline_stages._windowing.accumulators import (
    accumulator_ops,
    make_accumulator,
    parse_group,
)


def result(op: str, spec: Any, values: list[Any], docs: list[dict[str, Any]] | None = None) -> Any:
    acc = make_accumulator(op, spec)
    state = acc.init()
    for order, value in enumerate(values):
        state = acc.add(state, value, order=order, doc=None if docs is None else docs[order])
    return acc.finalize(state)


def typed(value: Any) -> str:
    """A comparison form that tells int from double (and long from int)."""
    return json.dumps(_tag(value), sort_keys=False)


def _tag(value: Any) -> Any:
    if isinstance(value, list):
        return [_tag(v) for v in value]
    if isinstance(value, dict):
        return {k: _tag(v) for k, v in value.items()}
    return [mql_type(value), to_ejson(value)]


class TestSum:
    def test_ignores_non_numbers_and_keeps_int(self) -> None:
        assert typed(result("$sum", "$x", [1, 2, "x", None, MISSING, True])) == typed(3)

    def test_double_makes_double(self) -> None:
        assert typed(result("$sum", "$x", [1, 2.5])) == typed(3.5)

    def test_int_overflow_becomes_long_then_double(self) -> None:
        assert typed(result("$sum", "$x", [2**31 - 1, 1])) == typed(Int64(2**31))
        assert typed(result("$sum", "$x", [2**63 - 1, 1])) == typed(float(2**63))

    def test_long_input_gives_long(self) -> None:
        assert mql_type(result("$sum", "$x", [Int64(1), 2])) == "long"

    def test_empty_is_int_zero(self) -> None:
        assert typed(result("$sum", "$x", [])) == typed(0)
        assert typed(result("$sum", "$x", ["a"])) == typed(0)

    def test_constant_one_counts(self) -> None:
        assert result("$sum", 1, [1, 1, 1]) == 3

    def test_decimal(self) -> None:
        assert result("$sum", "$x", [Decimal("1.1"), 1]) == Decimal("2.1")

    def test_non_finite(self) -> None:
        assert math.isnan(result("$sum", "$x", [math.inf, -math.inf]))
        assert result("$sum", "$x", [1, math.inf]) == math.inf
        assert math.isnan(result("$sum", "$x", [math.nan, 1.0]))

    def test_exact_double_summation(self) -> None:
        assert result("$sum", "$x", [0.1] * 10) == 1.0
        assert result("$sum", "$x", [1e16, 1.0, -1e16]) == 1.0


class TestAvg:
    def test_mean_is_double(self) -> None:
        assert typed(result("$avg", "$x", [1, 2])) == typed(1.5)
        assert typed(result("$avg", "$x", [2, 4])) == typed(3.0)
        assert result("$avg", "$x", [1, 2, 4]) == 7 / 3

    def test_null_without_numbers(self) -> None:
        assert result("$avg", "$x", []) is None
        assert result("$avg", "$x", ["a", None]) is None


class TestMinMax:
    def test_bson_order_ignoring_null_and_missing(self) -> None:
        values = [3, None, 1, "a", MISSING]
        assert result("$min", "$x", values) == 1
        assert result("$max", "$x", values) == "a"

    def test_all_null_gives_null(self) -> None:
        assert result("$min", "$x", [None, MISSING]) is None

    def test_equal_values_keep_the_first(self) -> None:
        assert typed(result("$min", "$x", [1, 1.0])) == typed(1)
        assert typed(result("$max", "$x", [2.0, 2])) == typed(2.0)

    def test_dates(self) -> None:
        dates = [to_datetime_ms(5), to_datetime_ms(1)]
        assert result("$min", "$x", dates) == to_datetime_ms(1)


class TestFirstLastPushSet:
    def test_first_last_of_missing_is_null(self) -> None:
        assert result("$first", "$x", [MISSING, 2]) is None
        assert result("$last", "$x", [1, MISSING]) is None
        assert result("$first", "$x", [1, 2]) == 1 and result("$last", "$x", [1, 2]) == 2

    def test_push_skips_missing_but_keeps_null(self) -> None:
        assert result("$push", "$x", [1, MISSING, None, 2]) == [1, None, 2]

    def test_add_to_set_dedupes_by_value(self) -> None:
        assert typed(
            result("$addToSet", "$x", [1, 1.0, "a", 1, MISSING, {"k": 1}, {"k": 1.0}])
        ) == typed([1, "a", {"k": 1}])

    def test_count(self) -> None:
        assert result("$count", {}, ["a", None, MISSING]) == 3


class TestMergeObjects:
    def test_later_fields_win_in_first_insertion_order(self) -> None:
        got = result("$mergeObjects", "$x", [{"a": 1, "b": 1}, None, MISSING, {"b": 2, "c": 3}])
        assert list(got.items()) == [("a", 1), ("b", 2), ("c", 3)]

    def test_non_object_is_a_document_error(self) -> None:
        acc = make_accumulator("$mergeObjects", "$x")
        with pytest.raises(
            MqlError, match=r"^\$mergeObjects requires object inputs, but input 5 is of type int$"
        ):
            acc.validate(5)
        with pytest.raises(MqlError, match='input "x" is of type string'):
            acc.validate("x")
        acc.validate(None)


class TestStdDev:
    def test_population_and_sample(self) -> None:
        values = [2, 4, 4, 4, 5, 5, 7, 9, "skip"]
        assert result("$stdDevPop", "$x", values) == 2.0
        assert result("$stdDevSamp", "$x", values) == math.sqrt(32 / 7)

    def test_edge_counts(self) -> None:
        assert result("$stdDevPop", "$x", []) is None
        assert result("$stdDevPop", "$x", [3]) == 0.0
        assert result("$stdDevSamp", "$x", [3]) is None

    def test_non_finite_gives_nan(self) -> None:
        assert math.isnan(result("$stdDevPop", "$x", [1, math.inf]))


class TestPercentile:
    spec = {"input": "$x", "p": [0.1, 0.5, 0.95, 1], "method": "approximate"}

    def test_discrete_nearest_rank(self) -> None:
        # computeTrueRank(n, p) = ceil(n*p) - 1: n=10 -> ranks 0, 4, 9, 9.
        assert result("$percentile", self.spec, list(range(10, 0, -1))) == [1.0, 5.0, 10.0, 10.0]

    def test_median_is_lower_middle_and_double(self) -> None:
        median = {"input": "$x", "method": "approximate"}
        assert typed(result("$median", median, [4, 1, 3, 2])) == typed(2.0)
        assert result("$median", median, [math.nan, "a", 1]) == 1.0

    def test_no_numeric_input(self) -> None:
        assert result("$percentile", self.spec, ["a"]) == [None, None, None, None]
        assert result("$median", {"input": "$x", "method": "approximate"}, []) is None

    @pytest.mark.parametrize(
        ("spec", "message"),
        [
            ({"input": "$x", "p": [0.5], "method": "exact"}, "only 'approximate'"),
            ({"input": "$x", "p": [1.5], "method": "approximate"}, "numbers from"),
            ({"input": "$x", "p": [], "method": "approximate"}, "numbers from"),
            ({"input": "$x", "method": "approximate"}, "numbers from"),
        ],
    )
    def test_invalid_specs(self, spec: dict[str, Any], message: str) -> None:
        with pytest.raises(ValueError, match=message):
            make_accumulator("$percentile", spec)


class TestOrdered:
    docs = [{"s": 10, "n": "a"}, {"s": 30, "n": "b"}, {"s": 20, "n": "c"}, {"s": 30, "n": "d"}]
    names = [d["n"] for d in docs]

    def test_top_and_bottom(self) -> None:
        by_score_desc = {"sortBy": {"s": -1}, "output": "$n"}
        assert (
            result("$top", by_score_desc, self.names, self.docs) == "b"
        )  # tie b/d: b arrived first
        assert result("$bottom", by_score_desc, self.names, self.docs) == "a"

    def test_top_n_and_bottom_n_in_sort_order(self) -> None:
        spec = {"sortBy": {"s": 1}, "output": "$n", "n": 2}
        assert result("$topN", spec, self.names, self.docs) == ["a", "c"]
        assert result("$bottomN", spec, self.names, self.docs) == ["b", "d"]

    def test_missing_output_is_null_and_array_sort_rule(self) -> None:
        docs = [{"a": [5, 1]}, {"a": 2}, {}]
        spec = {"sortBy": {"a": 1}, "output": "$o", "n": 3}
        assert result("$topN", spec, ["x", MISSING, "z"], docs) == ["z", "x", None]

    def test_first_n_last_n_keep_nulls(self) -> None:
        spec = {"input": "$x", "n": 2}
        assert result("$firstN", spec, [None, MISSING, 3]) == [None, None]
        assert result("$lastN", spec, [None, MISSING, 3]) == [None, 3]

    def test_max_n_min_n_drop_nulls(self) -> None:
        spec = {"input": "$x", "n": 2}
        assert result("$maxN", spec, [5, None, 7, MISSING, 6]) == [7, 6]
        assert result("$minN", spec, [5, None, 7, MISSING, 6]) == [5, 6]
        assert result("$maxN", {"input": "$x", "n": 5}, [None]) == []

    @pytest.mark.parametrize(
        ("op", "spec", "message"),
        [
            ("$topN", {"sortBy": {"s": 1}, "output": "$n", "n": 0}, "must be greater than 0"),
            ("$firstN", {"input": "$x", "n": 1.5}, "integral"),
            ("$firstN", {"input": "$x"}, "Missing value for 'n'"),
            ("$top", {"sortBy": {}, "output": "$n"}, "non-empty"),
            ("$top", {"sortBy": {"s": 2}, "output": "$n"}, "1 \\(for ascending\\)"),
            ("$top", {"output": "$n"}, "requires 'sortBy'"),
            ("$maxN", {"input": "$x", "n": 1, "extra": 1}, "unknown argument"),
        ],
    )
    def test_invalid_specs(self, op: str, spec: dict[str, Any], message: str) -> None:
        with pytest.raises(ValueError, match=message):
            make_accumulator(op, spec)


class TestParseGroup:
    def test_fields_in_order(self) -> None:
        spec = parse_group({"_id": "$k", "total": {"$sum": "$v"}, "n": {"$count": {}}})
        assert spec.id_expr == "$k"
        assert [(name, acc.op) for name, acc in spec.fields] == [("total", "$sum"), ("n", "$count")]
        assert spec.fields[0][1].input_expr == "$v"
        assert spec.fields[1][1].input_expr is MISSING

    @pytest.mark.parametrize(
        ("body", "message"),
        [
            ({"t": {"$sum": 1}}, "must include an _id"),
            ({"_id": None, "a.b": {"$sum": 1}}, "cannot contain '.'"),
            ({"_id": None, "t": 1}, "inside an object"),
            ({"_id": None, "t": {"$nope": 1}}, "Unknown group operator '\\$nope'"),
        ],
    )
    def test_errors(self, body: dict[str, Any], message: str) -> None:
        with pytest.raises(ValueError, match=message):
            parse_group(body)


# --------------------------------------------------------------------------- merge == add-all

SPECS: dict[str, Any] = {
    "$sum": "$x",
    "$avg": "$x",
    "$min": "$x",
    "$max": "$x",
    "$first": "$x",
    "$last": "$x",
    "$count": {},
    "$push": "$x",
    "$addToSet": "$x",
    "$mergeObjects": "$x",
    "$stdDevPop": "$x",
    "$stdDevSamp": "$x",
    "$median": {"input": "$x", "method": "approximate"},
    "$percentile": {"input": "$x", "p": [0, 0.3, 0.5, 0.99, 1], "method": "approximate"},
    "$top": {"sortBy": {"s": 1, "t": -1}, "output": "$x"},
    "$bottom": {"sortBy": {"s": -1}, "output": "$x"},
    "$topN": {"sortBy": {"s": 1}, "output": "$x", "n": 3},
    "$bottomN": {"sortBy": {"s": 1}, "output": "$x", "n": 2},
    "$firstN": {"input": "$x", "n": 2},
    "$lastN": {"input": "$x", "n": 3},
    "$maxN": {"input": "$x", "n": 2},
    "$minN": {"input": "$x", "n": 3},
}


def test_every_operator_is_covered() -> None:
    assert set(SPECS) == accumulator_ops()


_numbers = st.one_of(
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-1000, max_value=1000),
)
_plain = st.one_of(_numbers, st.none(), st.just(MISSING), st.sampled_from(["a", "b"]))
_objects = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 3), max_size=3)


@pytest.mark.parametrize("op", sorted(SPECS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_merge_of_partials_equals_add_all(data: st.DataObject, op: str) -> None:
    acc = make_accumulator(op, SPECS[op])
    values_strategy = st.one_of(st.none(), _objects) if op == "$mergeObjects" else _plain
    if op == "$sum" or op == "$avg":
        # Decimals and doubles mixed give a decimal; keep one numeric family per example.
        values_strategy = st.one_of(st.integers(-(2**40), 2**40), st.floats(), st.none())
    values = data.draw(st.lists(values_strategy, max_size=12), label="values")
    docs = data.draw(
        st.lists(
            st.fixed_dictionaries({"s": st.integers(0, 3), "t": st.sampled_from([1, "x", [2, 0]])}),
            min_size=len(values),
            max_size=len(values),
        ),
        label="docs",
    )
    k = data.draw(st.integers(1, 4), label="partitions")
    owner = data.draw(st.lists(st.integers(0, k - 1), min_size=len(values), max_size=len(values)))

    expected = acc.init()
    for order, (value, doc) in enumerate(zip(values, docs, strict=True)):
        expected = acc.add(expected, value, order=order, doc=doc)

    partials = [acc.init() for _ in range(k)]
    for order in data.draw(st.permutations(range(len(values))), label="arrival"):
        i = owner[order]
        partials[i] = acc.add(partials[i], values[order], order=order, doc=docs[order])
    # Through JSON, as the Spark operator keeps partials in state between micro-batches.
    partials = [acc.load(json.loads(json.dumps(acc.dump(p), allow_nan=False))) for p in partials]
    while len(partials) > 1:
        i = data.draw(st.integers(0, len(partials) - 2), label="merge at")
        partials[i : i + 2] = [acc.merge(partials[i], partials[i + 1])]
    assert typed(acc.finalize(partials[0])) == typed(acc.finalize(expected))
