"""Date operators: parts with time zones, formatting, parsing, arithmetic, truncation."""

from __future__ import annotations

import pytest

from ..test_expression_support import Case, Err, case_ids, evaluate, mismatch


def date(iso: str) -> dict[str, str]:
    """An Extended JSON date."""
    return {"$date": iso}


# 2024-03-05 is a Tuesday (ISO week 10, day of year 65); New York is on EST (UTC-5) then.
D = date("2024-03-05T10:11:12.345Z")
DOC = {"d": D, "n": None, "s": "x", "tz": "Bad/Zone", "ny": "America/New_York"}

CASES: list[Case] = [
    ("year", {"$year": "$d"}, DOC, 2024),
    ("month", {"$month": "$d"}, DOC, 3),
    ("dayOfMonth", {"$dayOfMonth": "$d"}, DOC, 5),
    ("hour", {"$hour": "$d"}, DOC, 10),
    ("minute", {"$minute": "$d"}, DOC, 11),
    ("second", {"$second": "$d"}, DOC, 12),
    ("millisecond", {"$millisecond": "$d"}, DOC, 345),
    ("dayOfYear", {"$dayOfYear": "$d"}, DOC, 65),
    ("dayOfWeek sunday is 1", {"$dayOfWeek": "$d"}, DOC, 3),
    ("week sunday based", {"$week": "$d"}, DOC, 9),
    ("isoWeek", {"$isoWeek": "$d"}, DOC, 10),
    ("isoWeekYear", {"$isoWeekYear": "$d"}, DOC, 2024),
    ("isoDayOfWeek", {"$isoDayOfWeek": "$d"}, DOC, 2),
    ("part list form", {"$year": ["$d"]}, DOC, 2024),
    ("hour in New York", {"$hour": {"date": "$d", "timezone": "America/New_York"}}, DOC, 5),
    ("hour with offset", {"$hour": {"date": "$d", "timezone": "+05:30"}}, DOC, 15),
    ("minute with offset", {"$minute": {"date": "$d", "timezone": "+05:30"}}, DOC, 41),
    ("zone from field", {"$hour": {"date": "$d", "timezone": "$ny"}}, DOC, 5),
    (
        "bad zone from field",
        {"$hour": {"date": "$d", "timezone": "$tz"}},
        DOC,
        Err('unrecognized time zone identifier: "Bad/Zone"'),
    ),
    ("null zone", {"$hour": {"date": "$d", "timezone": "$n"}}, DOC, None),
    ("year missing", {"$year": "$nope"}, {}, None),
    ("year of string", {"$year": "$s"}, DOC, Err("can't convert from BSON type string to Date")),
    ("isoWeekYear across new year", {"$isoWeekYear": date("2021-01-01T00:00:00Z")}, {}, 2020),
    ("isoWeek across new year", {"$isoWeek": date("2021-01-01T00:00:00Z")}, {}, 53),
    ("week zero", {"$week": date("2021-01-01T00:00:00Z")}, {}, 0),
    ("toString default", {"$dateToString": {"date": "$d"}}, DOC, "2024-03-05T10:11:12.345Z"),
    ("toString format", {"$dateToString": {"date": "$d", "format": "%Y-%m-%d"}}, DOC, "2024-03-05"),
    (
        "toString all parts",
        {"$dateToString": {"date": "$d", "format": "%j %U %V %G %u %w %L %%"}},
        DOC,
        "065 09 10 2024 2 3 345 %",
    ),
    (
        "toString zone",
        {"$dateToString": {"date": "$d", "format": "%H:%M %z %Z", "timezone": "+02:00"}},
        DOC,
        "12:11 +0200 +120",
    ),
    (
        "toString negative zone",
        {"$dateToString": {"date": "$d", "format": "%H %z", "timezone": "America/New_York"}},
        DOC,
        "05 -0500",
    ),
    (
        "toString month names",
        {"$dateToString": {"date": "$d", "format": "%b %B"}},
        DOC,
        "Mar March",
    ),
    ("toString onNull", {"$dateToString": {"date": "$nope", "onNull": "none"}}, {}, "none"),
    ("toString null", {"$dateToString": {"date": "$n"}}, DOC, None),
    (
        "toString of string",
        {"$dateToString": {"date": "$s"}},
        DOC,
        Err("can't convert from BSON type string to Date"),
    ),
    ("fromString iso", {"$dateFromString": {"dateString": "2024-03-05T10:11:12.345Z"}}, {}, D),
    (
        "fromString date only",
        {"$dateFromString": {"dateString": "2024-03-05"}},
        {},
        date("2024-03-05T00:00:00.000Z"),
    ),
    (
        "fromString zone",
        {"$dateFromString": {"dateString": "2024-03-05T10:00:00", "timezone": "+02:00"}},
        {},
        date("2024-03-05T08:00:00.000Z"),
    ),
    (
        "fromString sample solar",
        {"$dateFromString": {"dateString": "2024-08-12T21:41:01.788+00:00"}},
        {},
        date("2024-08-12T21:41:01.788Z"),
    ),
    (
        "fromString format",
        {"$dateFromString": {"dateString": "05/03/2024", "format": "%d/%m/%Y"}},
        {},
        date("2024-03-05T00:00:00.000Z"),
    ),
    (
        "fromString format zone",
        {
            "$dateFromString": {
                "dateString": "05/03/2024 10",
                "format": "%d/%m/%Y %H",
                "timezone": "+01:00",
            }
        },
        {},
        date("2024-03-05T09:00:00.000Z"),
    ),
    (
        "fromString bad",
        {"$dateFromString": {"dateString": "bad"}},
        {},
        Err("Error parsing date string 'bad'"),
    ),
    ("fromString onError", {"$dateFromString": {"dateString": "bad", "onError": "x"}}, {}, "x"),
    ("fromString onNull", {"$dateFromString": {"dateString": "$n", "onNull": "n"}}, DOC, "n"),
    (
        "fromString not string",
        {"$dateFromString": {"dateString": 5}},
        {},
        Err("$dateFromString requires that 'dateString' be a string, found: int"),
    ),
    (
        "fromString not string onError",
        {"$dateFromString": {"dateString": 5, "onError": "e"}},
        {},
        "e",
    ),
    (
        "dateAdd days",
        {"$dateAdd": {"startDate": "$d", "unit": "day", "amount": 2}},
        DOC,
        date("2024-03-07T10:11:12.345Z"),
    ),
    (
        "dateAdd hours back",
        {"$dateAdd": {"startDate": "$d", "unit": "hour", "amount": -1}},
        DOC,
        date("2024-03-05T09:11:12.345Z"),
    ),
    (
        "dateAdd month clamps",
        {"$dateAdd": {"startDate": date("2024-01-31T10:00:00Z"), "unit": "month", "amount": 1}},
        {},
        date("2024-02-29T10:00:00.000Z"),
    ),
    (
        "dateAdd year leap",
        {"$dateAdd": {"startDate": date("2024-02-29T00:00:00Z"), "unit": "year", "amount": 1}},
        {},
        date("2025-02-28T00:00:00.000Z"),
    ),
    (
        "dateAdd quarter",
        {"$dateAdd": {"startDate": "$d", "unit": "quarter", "amount": 1}},
        DOC,
        date("2024-06-05T10:11:12.345Z"),
    ),
    (
        "dateAdd day across DST",
        {
            "$dateAdd": {
                "startDate": date("2024-03-09T12:00:00Z"),
                "unit": "day",
                "amount": 1,
                "timezone": "America/New_York",
            }
        },
        {},
        date("2024-03-10T11:00:00.000Z"),
    ),
    (
        "dateAdd fraction",
        {"$dateAdd": {"startDate": "$d", "unit": "day", "amount": 1.5}},
        DOC,
        Err("$dateAdd expects integer amount of time units"),
    ),
    (
        "dateAdd not date",
        {"$dateAdd": {"startDate": "$s", "unit": "day", "amount": 1}},
        DOC,
        Err("$dateAdd requires startDate to be convertible to a date"),
    ),
    ("dateAdd null", {"$dateAdd": {"startDate": "$n", "unit": "day", "amount": 1}}, DOC, None),
    (
        "dateSubtract",
        {"$dateSubtract": {"startDate": "$d", "unit": "minute", "amount": 11}},
        DOC,
        date("2024-03-05T10:00:12.345Z"),
    ),
    (
        "dateDiff year boundary",
        {
            "$dateDiff": {
                "startDate": date("2021-12-31T10:00:00Z"),
                "endDate": date("2022-01-01T10:00:00Z"),
                "unit": "year",
            }
        },
        {},
        1,
    ),
    (
        "dateDiff backwards",
        {
            "$dateDiff": {
                "startDate": date("2022-01-01T10:00:00Z"),
                "endDate": date("2021-12-31T10:00:00Z"),
                "unit": "year",
            }
        },
        {},
        -1,
    ),
    (
        "dateDiff day boundary",
        {
            "$dateDiff": {
                "startDate": date("2024-03-05T23:00:00Z"),
                "endDate": date("2024-03-06T01:00:00Z"),
                "unit": "day",
            }
        },
        {},
        1,
    ),
    (
        "dateDiff hour boundary",
        {
            "$dateDiff": {
                "startDate": date("2024-03-05T10:59:00Z"),
                "endDate": date("2024-03-05T11:01:00Z"),
                "unit": "hour",
            }
        },
        {},
        1,
    ),
    (
        "dateDiff week sunday",
        {
            "$dateDiff": {
                "startDate": date("2024-03-09T12:00:00Z"),
                "endDate": date("2024-03-10T12:00:00Z"),
                "unit": "week",
            }
        },
        {},
        1,
    ),
    (
        "dateDiff week monday",
        {
            "$dateDiff": {
                "startDate": date("2024-03-09T12:00:00Z"),
                "endDate": date("2024-03-10T12:00:00Z"),
                "unit": "week",
                "startOfWeek": "monday",
            }
        },
        {},
        0,
    ),
    (
        "dateDiff month",
        {
            "$dateDiff": {
                "startDate": date("2024-01-31T00:00:00Z"),
                "endDate": date("2024-02-01T00:00:00Z"),
                "unit": "month",
            }
        },
        {},
        1,
    ),
    (
        "dateDiff quarter",
        {
            "$dateDiff": {
                "startDate": date("2024-03-31T00:00:00Z"),
                "endDate": date("2024-04-01T00:00:00Z"),
                "unit": "quarter",
            }
        },
        {},
        1,
    ),
    (
        "dateDiff millis",
        {
            "$dateDiff": {
                "startDate": "$d",
                "endDate": date("2024-03-05T10:11:13.000Z"),
                "unit": "millisecond",
            }
        },
        DOC,
        655,
    ),
    (
        "dateDiff day in zone",
        {
            "$dateDiff": {
                "startDate": date("2024-03-05T23:00:00Z"),
                "endDate": date("2024-03-06T01:00:00Z"),
                "unit": "day",
                "timezone": "America/New_York",
            }
        },
        {},
        0,
    ),
    (
        "dateDiff not date",
        {"$dateDiff": {"startDate": "$s", "endDate": "$d", "unit": "day"}},
        DOC,
        Err("$dateDiff requires 'startDate' to be a date, but got string"),
    ),
    (
        "dateTrunc day",
        {"$dateTrunc": {"date": "$d", "unit": "day"}},
        DOC,
        date("2024-03-05T00:00:00.000Z"),
    ),
    (
        "dateTrunc month",
        {"$dateTrunc": {"date": "$d", "unit": "month"}},
        DOC,
        date("2024-03-01T00:00:00.000Z"),
    ),
    (
        "dateTrunc quarter",
        {"$dateTrunc": {"date": "$d", "unit": "quarter"}},
        DOC,
        date("2024-01-01T00:00:00.000Z"),
    ),
    (
        "dateTrunc year",
        {"$dateTrunc": {"date": "$d", "unit": "year"}},
        DOC,
        date("2024-01-01T00:00:00.000Z"),
    ),
    (
        "dateTrunc week sunday",
        {"$dateTrunc": {"date": "$d", "unit": "week"}},
        DOC,
        date("2024-03-03T00:00:00.000Z"),
    ),
    (
        "dateTrunc week monday",
        {"$dateTrunc": {"date": "$d", "unit": "week", "startOfWeek": "Monday"}},
        DOC,
        date("2024-03-04T00:00:00.000Z"),
    ),
    (
        "dateTrunc hour bins",
        {"$dateTrunc": {"date": date("2024-03-05T11:30:00Z"), "unit": "hour", "binSize": 2}},
        {},
        date("2024-03-05T10:00:00.000Z"),
    ),
    (
        "dateTrunc minute bins",
        {"$dateTrunc": {"date": "$d", "unit": "minute", "binSize": 15}},
        DOC,
        date("2024-03-05T10:00:00.000Z"),
    ),
    (
        "dateTrunc minute bins ref",
        {"$dateTrunc": {"date": date("2010-01-01T10:45:20.450Z"), "unit": "minute", "binSize": 2}},
        {},
        date("2010-01-01T10:44:00.000Z"),
    ),
    (
        "dateTrunc week of 2010",
        {"$dateTrunc": {"date": date("2010-01-01T10:45:20.450Z"), "unit": "week"}},
        {},
        date("2009-12-27T00:00:00.000Z"),
    ),
    (
        "dateTrunc day in zone",
        {"$dateTrunc": {"date": date("2024-03-05T20:00:00Z"), "unit": "day", "timezone": "+05:30"}},
        {},
        date("2024-03-05T18:30:00.000Z"),
    ),
    (
        "dateTrunc bad bin",
        {"$dateTrunc": {"date": "$d", "unit": "day", "binSize": 0}},
        DOC,
        Err("$dateTrunc requires 'binSize' to be greater than 0, but got value 0"),
    ),
    ("dateTrunc null", {"$dateTrunc": {"date": "$n", "unit": "day"}}, DOC, None),
]


@pytest.fixture(scope="module")
def outcomes(spark):
    return evaluate(spark, [(c[1], c[2]) for c in CASES])


@pytest.mark.spark
@pytest.mark.parametrize("index", range(len(CASES)), ids=case_ids(CASES))
def test_dates(outcomes, index):
    problem = mismatch(outcomes[index], CASES[index][3])
    assert problem is None, problem
