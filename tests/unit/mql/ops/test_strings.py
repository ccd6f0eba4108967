"""String operators."""

from __future__ import annotations

import pytest

from ..test_expression_support import Case, Err, case_ids, evaluate, mismatch

DOC = {"s": "héllo", "n": None, "r": "[", "r2": "c$", "x": 5}

CASES: list[Case] = [
    ("concat", {"$concat": ["a", "b", "c"]}, {}, "abc"),
    ("concat null", {"$concat": ["a", "$n"]}, DOC, None),
    ("concat missing", {"$concat": ["a", "$nope"]}, {}, None),
    ("concat int", {"$concat": ["a", 1]}, {}, Err("$concat only supports strings, not int")),
    ("concat empty", {"$concat": []}, {}, ""),
    ("substrCP code points", {"$substrCP": ["$s", 1, 3]}, DOC, "éll"),
    ("substrCP past end", {"$substrCP": ["abc", 5, 2]}, {}, ""),
    (
        "substrCP negative start",
        {"$substrCP": ["abc", -1, 2]},
        {},
        Err("$substrCP: the starting index must be nonnegative integer."),
    ),
    (
        "substrCP negative length",
        {"$substrCP": ["abc", 0, -1]},
        {},
        Err("$substrCP: length must be a nonnegative integer."),
    ),
    (
        "substrCP string index",
        {"$substrCP": ["abc", "x", 1]},
        {},
        Err("$substrCP: starting index must be a numeric type (is BSON type string)"),
    ),
    ("substrCP null input", {"$substrCP": ["$n", 0, 1]}, DOC, ""),
    ("substrCP number input", {"$substrCP": [123, 0, 2]}, {}, "12"),
    ("substrBytes", {"$substrBytes": ["$s", 0, 3]}, DOC, "hé"),
    (
        "substrBytes splits char",
        {"$substrBytes": ["$s", 0, 2]},
        DOC,
        Err("Invalid range, ending index is in the middle of a UTF-8 character."),
    ),
    ("substr alias", {"$substr": ["abcdef", 2, 3]}, {}, "cde"),
    ("toLower", {"$toLower": "ABC"}, {}, "abc"),
    ("toUpper", {"$toUpper": "abc"}, {}, "ABC"),
    ("toUpper ascii only", {"$toUpper": "é"}, {}, "é"),
    ("toLower null", {"$toLower": "$n"}, DOC, ""),
    ("toUpper number", {"$toUpper": 12}, {}, "12"),
    (
        "toLower object",
        {"$toLower": [{"$literal": {"a": 1}}]},
        {},
        Err("can't convert from BSON type object to String"),
    ),
    ("trim", {"$trim": {"input": "  hi  "}}, {}, "hi"),
    ("ltrim", {"$ltrim": {"input": "  hi  "}}, {}, "hi  "),
    ("rtrim", {"$rtrim": {"input": "  hi  "}}, {}, "  hi"),
    ("trim chars", {"$trim": {"input": "xxhixx", "chars": "x"}}, {}, "hi"),
    ("trim null", {"$trim": {"input": "$n"}}, DOC, None),
    (
        "trim number",
        {"$trim": {"input": "$x"}},
        DOC,
        Err("$trim requires its input to be a string"),
    ),
    ("split", {"$split": ["a,b,c", ","]}, {}, ["a", "b", "c"]),
    ("split trailing", {"$split": ["a,b,", ","]}, {}, ["a", "b", ""]),
    ("split literal dot", {"$split": ["a.b", "."]}, {}, ["a", "b"]),
    ("split regex chars", {"$split": ["a\\Eb", "\\E"]}, {}, ["a", "b"]),
    (
        "split empty separator",
        {"$split": ["abc", ""]},
        {},
        Err("$split requires a non-empty separator"),
    ),
    ("split null", {"$split": ["$n", ","]}, DOC, None),
    (
        "split number",
        {"$split": [1, ","]},
        {},
        Err(
            "$split requires an expression that evaluates to a string as a first argument, found: int"
        ),
    ),
    ("strLenCP", {"$strLenCP": "$s"}, DOC, 5),
    ("strLenBytes", {"$strLenBytes": "$s"}, DOC, 6),
    ("strLenCP int", {"$strLenCP": 5}, {}, Err("$strLenCP requires a string argument, found: int")),
    (
        "strLenCP null",
        {"$strLenCP": "$n"},
        DOC,
        Err("$strLenCP requires a string argument, found: null"),
    ),
    ("regexMatch", {"$regexMatch": {"input": "abc", "regex": "b"}}, {}, True),
    ("regexMatch no", {"$regexMatch": {"input": "abc", "regex": "^b"}}, {}, False),
    ("regexMatch i", {"$regexMatch": {"input": "abc", "regex": "^AB", "options": "i"}}, {}, True),
    ("regexMatch m", {"$regexMatch": {"input": "a\nb", "regex": "^b", "options": "m"}}, {}, True),
    ("regexMatch without m", {"$regexMatch": {"input": "a\nb", "regex": "^b"}}, {}, False),
    ("regexMatch s", {"$regexMatch": {"input": "a\nb", "regex": "a.b", "options": "s"}}, {}, True),
    ("regexMatch x", {"$regexMatch": {"input": "ab", "regex": "a b", "options": "x"}}, {}, True),
    ("regexMatch null input", {"$regexMatch": {"input": "$n", "regex": "a"}}, DOC, False),
    (
        "regexMatch number input",
        {"$regexMatch": {"input": "$x", "regex": "a"}},
        DOC,
        Err("$regexMatch needs 'input' to be of type string"),
    ),
    ("regexMatch field regex", {"$regexMatch": {"input": "abc", "regex": "$r2"}}, DOC, True),
    (
        "regexMatch bad field regex",
        {"$regexMatch": {"input": "abc", "regex": "$r"}},
        DOC,
        Err("Invalid Regex in $regexMatch"),
    ),
    ("strcasecmp equal", {"$strcasecmp": ["abc", "ABC"]}, {}, 0),
    ("strcasecmp less", {"$strcasecmp": ["a", "B"]}, {}, -1),
    ("indexOfCP", {"$indexOfCP": ["cafétéria", "é"]}, {}, 3),
    ("indexOfCP absent", {"$indexOfCP": ["abc", "d"]}, {}, -1),
    ("indexOfCP bounded", {"$indexOfCP": ["abc", "c", 0, 2]}, {}, -1),
    ("indexOfCP start", {"$indexOfCP": ["abcabc", "b", 2]}, {}, 4),
    ("indexOfCP null", {"$indexOfCP": ["$n", "a"]}, DOC, None),
    ("indexOfCP empty token", {"$indexOfCP": ["abc", ""]}, {}, 0),
    (
        "replaceAll",
        {"$replaceAll": {"input": "a-b-c", "find": "-", "replacement": "+"}},
        {},
        "a+b+c",
    ),
    (
        "replaceOne",
        {"$replaceOne": {"input": "a-b-c", "find": "-", "replacement": "+"}},
        {},
        "a+b-c",
    ),
    (
        "replaceOne absent",
        {"$replaceOne": {"input": "abc", "find": "x", "replacement": "+"}},
        {},
        "abc",
    ),
    (
        "replaceAll null",
        {"$replaceAll": {"input": "$n", "find": "a", "replacement": "b"}},
        DOC,
        None,
    ),
]


@pytest.fixture(scope="module")
def outcomes(spark):
    return evaluate(spark, [(c[1], c[2]) for c in CASES])


@pytest.mark.spark
@pytest.mark.parametrize("index", range(len(CASES)), ids=case_ids(CASES))
def test_strings(outcomes, index):
    problem = mismatch(outcomes[index], CASES[index][3])
    assert problem is None, problem
