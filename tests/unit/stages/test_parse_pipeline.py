"""`parse_pipeline`: placement rules, one-pass problem collection, hints, fidelity, options, lint."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline_stages import (
    REGISTRY,
    ParsedPipeline,
    PipelineInvalid,
    check_options,
    lint_pipeline,
    parse_pipeline,
)

SOURCE = {"$source": {"connectionName": "kafka", "topic": "in"}}
GROUP = {"$group": {"_id": "$k", "n": {"$count": {}}}}
TUMBLING = {"$tumblingWindow": {"interval": {"size": 10, "unit": "second"}, "pipeline": [GROUP]}}
MERGE = {"$merge": {"into": {"connectionName": "atlas", "db": "d", "coll": "c"}}}
EMIT = {"$emit": {"connectionName": "kafka", "topic": "out"}}
MATCH = {"$match": {"a": 1}}
SET = {"$set": {"b": 1}}


def problems(raw: Any, **kwargs: Any) -> list[tuple[str, str]]:
    with pytest.raises(PipelineInvalid) as info:
        parse_pipeline(raw, **kwargs)
    return [(p.code, p.path) for p in info.value.problems]


def messages(raw: Any) -> list[str]:
    with pytest.raises(PipelineInvalid) as info:
        parse_pipeline(raw)
    return [p.message for p in info.value.problems]


# --------------------------------------------------------------------------- valid pipelines


def test_full_pipeline_and_accessors() -> None:
    parsed = parse_pipeline([SOURCE, MATCH, TUMBLING, SET, MERGE])
    assert isinstance(parsed, ParsedPipeline)
    assert [(s.key, s.path) for s in parsed.stages] == [
        ("$source", "/pipeline/0"),
        ("$match", "/pipeline/1"),
        ("$tumblingWindow", "/pipeline/2"),
        ("$set", "/pipeline/3"),
        ("$merge", "/pipeline/4"),
    ]
    assert parsed.source.key == "$source"
    assert parsed.sink is not None and parsed.sink.key == "$merge" and parsed.has_sink
    assert parsed.window is not None and parsed.window.path == "/pipeline/2"
    assert [s.key for s in parsed.middle] == ["$match", "$tumblingWindow", "$set"]
    assert [s.key for s in parsed.before_window] == ["$match"]
    assert [s.key for s in parsed.after_window] == ["$set"]
    assert [(s.key, s.path) for s in parsed.window_stages] == [
        ("$group", "/pipeline/2/$tumblingWindow/pipeline/0")
    ]
    assert parsed.window_stages[0].at("n") == "/pipeline/2/$tumblingWindow/pipeline/0/$group/n"
    assert parsed.window_operator_name == "GroupOperator"
    assert [s.key for s in parsed.walk()] == [
        "$source",
        "$match",
        "$tumblingWindow",
        "$group",
        "$set",
        "$merge",
    ]
    assert [s.operator_name for s in parsed.stages] == [
        "SourceOperator",
        "MatchOperator",
        None,
        "AddFieldsOperator",
        "MergeOperator",
    ]


def test_pipeline_without_sink_or_window_is_valid() -> None:
    parsed = parse_pipeline([SOURCE, MATCH])
    assert (parsed.sink, parsed.has_sink, parsed.window) == (None, False, None)
    assert [s.key for s in parsed.middle] == ["$match"]
    assert [s.key for s in parsed.before_window] == ["$match"]
    assert (parsed.after_window, parsed.window_stages, parsed.window_operator_name) == (
        (),
        (),
        None,
    )


def test_source_only_and_emit_sink() -> None:
    assert parse_pipeline([SOURCE]).middle == ()
    assert parse_pipeline([SOURCE, EMIT]).sink.key == "$emit"


def test_window_operator_name_is_first_window_aware_stage() -> None:
    window = {
        "$hoppingWindow": {
            "interval": {"size": 4, "unit": "second"},
            "hopSize": {"size": 2, "unit": "second"},
            "pipeline": [MATCH, {"$sort": {"a": 1}}, {"$limit": 2}],
        }
    }
    assert parse_pipeline([SOURCE, window]).window_operator_name == "SortOperator"


def test_custom_base_path() -> None:
    assert problems([SOURCE, {"$limit": 0}], path="/body/pipeline")[0] == (
        "greater_than",
        "/body/pipeline/1/$limit",
    )


# --------------------------------------------------------------------------- placement (§2)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ([MATCH, SOURCE], [("misplaced_stage", "/pipeline/1")]),
        ([MATCH], [("missing", "/pipeline")]),
        ([SOURCE, SOURCE], [("misplaced_stage", "/pipeline/1")]),
        ([SOURCE, MERGE, MATCH], [("misplaced_stage", "/pipeline/1")]),
        (
            [SOURCE, MERGE, EMIT],
            [("misplaced_stage", "/pipeline/1"), ("misplaced_stage", "/pipeline/2")],
        ),
        (
            [SOURCE, EMIT, MERGE],
            [("misplaced_stage", "/pipeline/1"), ("misplaced_stage", "/pipeline/2")],
        ),
        ([SOURCE, TUMBLING, TUMBLING], [("misplaced_stage", "/pipeline/2")]),
        ([SOURCE, GROUP], [("misplaced_stage", "/pipeline/1")]),
        (
            [SOURCE, {"$sort": {"a": 1}}, {"$limit": 1}, {"$count": "n"}],
            [
                ("misplaced_stage", "/pipeline/1"),
                ("misplaced_stage", "/pipeline/2"),
                ("misplaced_stage", "/pipeline/3"),
            ],
        ),
        (
            [
                SOURCE,
                {
                    "$tumblingWindow": {
                        "interval": {"size": 1, "unit": "second"},
                        "pipeline": [
                            GROUP,
                            MERGE,
                            SOURCE,
                            TUMBLING,
                            {"$setStreamMeta": {"stream.a": 1}},
                        ],
                    }
                },
            ],
            [
                ("misplaced_stage", "/pipeline/1/$tumblingWindow/pipeline/1"),
                ("misplaced_stage", "/pipeline/1/$tumblingWindow/pipeline/2"),
                ("misplaced_stage", "/pipeline/1/$tumblingWindow/pipeline/3"),
                ("misplaced_stage", "/pipeline/1/$tumblingWindow/pipeline/4"),
            ],
        ),
        (
            [
                SOURCE,
                {
                    "$tumblingWindow": {
                        "interval": {"size": 1, "unit": "second"},
                        "pipeline": [{"$limit": 5}, GROUP],
                    }
                },
            ],
            [("misplaced_stage", "/pipeline/1/$tumblingWindow/pipeline/0")],
        ),
    ],
)
def test_placement(raw, expected) -> None:
    assert problems(raw) == expected


@pytest.mark.parametrize(
    "inner",
    [
        [
            MATCH,
            {"$project": {"a": 1}},
            SET,
            {"$addFields": {}},
            {"$unset": "a"},
            {"$replaceRoot": {"newRoot": "$a"}},
            {"$replaceWith": "$a"},
            {"$redact": "$$KEEP"},
            {"$unwind": "$a"},
            {"$validate": {"validator": {}}},
            GROUP,
        ],
        [{"$sort": {"a": -1}}, {"$limit": 3}],
        [GROUP, {"$sort": {"n": -1}}, {"$limit": 1}, {"$count": "c"}],
        [
            {
                "$lookup": {
                    "from": {"connectionName": "a", "db": "d", "coll": "c"},
                    "pipeline": [],
                    "as": "x",
                }
            },
            GROUP,
        ],
    ],
)
def test_stages_allowed_in_windows(inner) -> None:
    window = {"$tumblingWindow": {"interval": {"size": 1, "unit": "second"}, "pipeline": inner}}
    assert len(parse_pipeline([SOURCE, window]).window_stages) == len(inner)


def test_placement_messages() -> None:
    assert messages([SOURCE, GROUP]) == [
        "$group stage is only permitted in the inner pipeline of a window stage"
    ]
    assert messages([SOURCE, TUMBLING, TUMBLING]) == [
        "Only one window stage is allowed in a pipeline."
    ]
    inner_merge = {
        "$tumblingWindow": {"interval": {"size": 1, "unit": "second"}, "pipeline": [GROUP, MERGE]}
    }
    assert messages([SOURCE, inner_merge]) == [
        "$merge stage is not permitted in the inner pipeline of a window stage"
    ]
    assert messages([SOURCE, MERGE, MATCH]) == ["$merge must be the last stage of the pipeline"]
    assert messages([MATCH, SOURCE]) == ["$source must be the first stage of the pipeline"]
    assert messages([SOURCE, SOURCE]) == ["Only one $source stage is allowed in a pipeline."]


# --------------------------------------------------------------------------- shapes, names, one pass


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"$source": {}}, [("list_type", "/pipeline")]),
        ([], [("too_short", "/pipeline")]),
        ([SOURCE, 5], [("stage_shape", "/pipeline/1")]),
        ([SOURCE, {}], [("stage_shape", "/pipeline/1")]),
        ([SOURCE, {"$match": {}, "$set": {}}], [("stage_shape", "/pipeline/1")]),
        ([SOURCE, {"$externalFunction": {}}], [("unsupported_stage", "/pipeline/1")]),
        ([SOURCE, {"$facet": {}}], [("unsupported_stage", "/pipeline/1")]),
        ([SOURCE, {"$out": "c"}], [("unsupported_stage", "/pipeline/1")]),
        ([SOURCE, {"$groop": {}}], [("unknown_stage", "/pipeline/1")]),
    ],
)
def test_shapes_and_names(raw, expected) -> None:
    assert problems(raw) == expected


@pytest.mark.parametrize(
    ("stage", "hint"),
    [
        ("$groop", "; did you mean '$group'?"),
        ("$tumblingwindow", "; did you mean '$tumblingWindow'?"),
        ("match", "; did you mean '$match'?"),
        ("$adFields", "; did you mean '$addFields'?"),
        ("$zzzz", ""),
    ],
)
def test_unknown_stage_hint(stage, hint) -> None:
    assert messages([SOURCE, {stage: {}}]) == [f"Unknown stage '{stage}'{hint}"]


def test_unsupported_stage_message() -> None:
    assert messages([SOURCE, {"$externalFunction": {}}]) == [
        "Unsupported stage: $externalFunction: external (AWS Lambda) functions are not "
        "available in Sluice"
    ]


def test_every_problem_is_collected_in_one_pass() -> None:
    raw = [
        {"$source": {"connectionName": "k", "topic": "t", "initialSync": {}}},
        {"$groop": {}},
        {
            "$tumblingWindow": {
                "interval": {"size": 0, "unit": "second"},
                "allowedLateness": 7,
                "pipeline": [{"$group": {"_id": None, "t": {"$summ": 1}}}, {"$merge": {}}],
            }
        },
        {"$limit": 0},
        {"$project": {"a": 1, "b": 0}},
        {"$emit": {"connectionName": "k", "topic": "t"}},
        {"$match": {"a": 1}},
    ]
    assert problems(raw) == [
        ("unsupported_option", "/pipeline/0/$source/initialSync"),
        ("unknown_stage", "/pipeline/1"),
        ("unknown_operator", "/pipeline/2/$tumblingWindow/pipeline/0/$group/t/$summ"),
        ("missing", "/pipeline/2/$tumblingWindow/pipeline/1/$merge/into"),
        ("invalid_value", "/pipeline/2/$tumblingWindow/allowedLateness"),
        ("greater_than", "/pipeline/2/$tumblingWindow/interval/size"),
        ("greater_than", "/pipeline/3/$limit"),
        ("invalid_combination", "/pipeline/4/$project/b"),
        ("misplaced_stage", "/pipeline/5"),
        ("misplaced_stage", "/pipeline/2/$tumblingWindow/pipeline/1"),
        ("misplaced_stage", "/pipeline/3"),
    ]


def test_snake_case_names_are_rejected_everywhere() -> None:
    raw = [
        {"$source": {"connection_name": "k"}},
        {
            "$tumblingWindow": {
                "interval": {"size": 1, "unit": "second"},
                "allowed_lateness": 0,
                "pipeline": [{"$validate": {"validator": {}, "validation_action": "dlq"}}, GROUP],
            }
        },
    ]
    assert problems(raw) == [
        ("missing", "/pipeline/0/$source/connectionName"),
        ("extra_forbidden", "/pipeline/0/$source/connection_name"),
        ("extra_forbidden", "/pipeline/1/$tumblingWindow/pipeline/0/$validate/validation_action"),
        ("extra_forbidden", "/pipeline/1/$tumblingWindow/allowed_lateness"),
    ]


def test_pointer_tokens_are_escaped() -> None:
    assert problems([SOURCE, {"$project": {"a/b": 1, "c~d": 0}}]) == [
        ("invalid_combination", "/pipeline/1/$project/c~0d")
    ]


@pytest.mark.parametrize(
    "raw",
    [
        [SOURCE, {"$limit": "{message} {0} {"}],
        [SOURCE, {"$limit": float("nan")}],
        [SOURCE, {"$limit": float("inf")}],
        [{"$source": {"connectionName": "k", "topic": "{x}", "tsFieldName": "{a.b}"}}],
        [
            SOURCE,
            {
                "$tumblingWindow": {
                    "interval": {"size": float("nan"), "unit": "ms"},
                    "pipeline": [GROUP],
                }
            },
        ],
        [
            SOURCE,
            {
                "$tumblingWindow": {
                    "interval": {"size": 1, "unit": "ms"},
                    "allowedLateness": float("inf"),
                    "pipeline": [GROUP],
                }
            },
        ],
    ],
)
def test_odd_values_give_problems_not_crashes(raw) -> None:
    with pytest.raises(PipelineInvalid) as info:
        parse_pipeline(raw)
    assert all(p.message for p in info.value.problems)


# --------------------------------------------------------------------------- fidelity


def test_key_order_and_int_double_fidelity_survive_json_text() -> None:
    text = json.dumps(
        [
            SOURCE,
            {"$addFields": {"z": 10, "a": 10.0, "m": {"$multiply": ["$x", 2.5, 3]}}},
            {"$project": {"z": 1, "a": 1.0, "_id": 0}},
            {
                "$tumblingWindow": {
                    "interval": {"size": 1, "unit": "minute"},
                    "pipeline": [
                        {"$sort": {"z": -1, "a": 1, "b": -1}},
                        {
                            "$group": {
                                "_id": {"b": "$b", "a": "$a"},
                                "s": {"$sum": 1.0},
                                "c": {"$sum": 1},
                            }
                        },
                    ],
                }
            },
        ]
    )
    parsed = parse_pipeline(json.loads(text))
    add_fields = parsed.stages[1].spec.fields
    assert list(add_fields) == ["z", "a", "m"]
    assert (type(add_fields["z"]), type(add_fields["a"])) == (int, float)
    assert [type(v) for v in add_fields["m"]["$multiply"][1:]] == [float, int]
    assert list(parsed.stages[2].spec.fields) == ["z", "a", "_id"]
    assert type(parsed.stages[2].spec.fields["a"]) is float
    sort, group = (s.spec for s in parsed.window_stages)
    assert list(sort.keys) == ["z", "a", "b"]
    assert list(group.id) == ["b", "a"]
    assert list(group.accumulators) == ["s", "c"]
    assert (type(group.accumulators["s"].argument), type(group.accumulators["c"].argument)) == (
        float,
        int,
    )


# --------------------------------------------------------------------------- options and lint


def test_validate_dlq_needs_a_dlq() -> None:
    validate = {"$validate": {"validator": {}, "validationAction": "dlq"}}
    window = {
        "$tumblingWindow": {
            "interval": {"size": 1, "unit": "second"},
            "pipeline": [validate, GROUP],
        }
    }
    parsed = parse_pipeline([SOURCE, validate, window])
    found = check_options(parsed, has_dlq=False)
    assert [(p.code, p.path, p.message) for p in found] == [
        (
            "invalid_combination",
            "/pipeline/1/$validate/validationAction",
            "DLQ must be specified if validation action is dlq.",
        ),
        (
            "invalid_combination",
            "/pipeline/2/$tumblingWindow/pipeline/0/$validate/validationAction",
            "DLQ must be specified if validation action is dlq.",
        ),
    ]
    assert check_options(parsed, has_dlq=True) == []
    assert (
        check_options(parse_pipeline([SOURCE, {"$validate": {"validator": {}}}]), has_dlq=False)
        == []
    )


def test_lint_event_time_window() -> None:
    parsed = parse_pipeline([SOURCE, TUMBLING])
    assert [(w.code, w.path) for w in lint_pipeline(parsed, has_dlq=False)] == [
        ("late_data_dropped", "/pipeline/1/$tumblingWindow"),
        ("window_may_not_close", "/pipeline/1/$tumblingWindow/idleTimeout"),
    ]
    assert [w.code for w in lint_pipeline(parsed, has_dlq=True)] == ["window_may_not_close"]
    warning = lint_pipeline(parsed, has_dlq=False)[0]
    assert "late records will be dropped" in warning.message
    assert warning.message.startswith("$tumblingWindow ")


def test_lint_quiet_cases() -> None:
    idle = {
        "$sessionWindow": {
            "partitionBy": "$u",
            "gap": {"size": 1, "unit": "minute"},
            "idleTimeout": {"size": 1, "unit": "minute"},
            "pipeline": [GROUP],
        }
    }
    assert lint_pipeline(parse_pipeline([SOURCE, idle]), has_dlq=True) == []
    processing = {
        "$tumblingWindow": {
            "interval": {"size": 1, "unit": "second"},
            "boundary": "processingTime",
            "pipeline": [GROUP],
        }
    }
    assert lint_pipeline(parse_pipeline([SOURCE, processing]), has_dlq=False) == []
    assert lint_pipeline(parse_pipeline([SOURCE, MATCH]), has_dlq=False) == []


def test_lint_sliding_window() -> None:
    sliding = {
        "$slidingWindow": {"timeDifference": {"size": 1, "unit": "minute"}, "pipeline": [GROUP]}
    }
    assert [w.code for w in lint_pipeline(parse_pipeline([SOURCE, sliding]), has_dlq=False)] == [
        "late_data_dropped",
        "window_may_not_close",
    ]


# --------------------------------------------------------------------------- robustness property


def _resolves(raw: Any, pointer: str) -> bool:
    node = raw
    for token in [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]:
        if isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        elif isinstance(node, dict) and token in node:
            node = node[token]
        else:
            return False
    return True


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 40)
    | st.floats(allow_nan=True)
    | st.sampled_from(["", "a", "$a", "a.b", "$$x", "stream.x"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "a",
                    "_id",
                    "$sum",
                    "size",
                    "unit",
                    "pipeline",
                    "interval",
                    "topic",
                    "connectionName",
                    "n",
                ]
            ),
            inner,
            max_size=3,
        )
    ),
    max_leaves=12,
)
stages = st.dictionaries(
    st.sampled_from([*REGISTRY, "$externalFunction", "$nope"]), json_values, min_size=1, max_size=2
)


@settings(max_examples=300, deadline=None)
@given(st.lists(stages | json_values, max_size=5))
def test_any_input_gives_a_pipeline_or_pointed_problems(raw: list[Any]) -> None:
    raw = [{"$source": {"documents": []}}, *raw]
    try:
        parse_pipeline(raw)
    except PipelineInvalid as exc:
        assert exc.problems
        for problem in exc.problems:
            parent = problem.path.rsplit("/", 1)[0]
            document = {"pipeline": raw}
            assert _resolves(document, problem.path) or _resolves(document, parent), problem
            assert problem.message and problem.code
