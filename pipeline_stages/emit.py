"""`$emit`: write each document to a stream or a time-series collection (a sink; last stage).

The connection type is only known at compile time, so the spec holds the union of the forms
and checks what does not depend on it:

* **Kafka** (Atlas): `connectionName`, `topic` (string or expression), `config {acks:
  "all"(default)|-1|0|1, compression_type: none(default)|gzip|snappy|lz4|zstd, dateFormat:
  default|ISO8601, headers, key, keyFormat (required when key is set), outputFormat:
  relaxedJson(default)|canonicalJson, tombstoneWhen}`;
* **Atlas time series** (Atlas): `connectionName`, `db`, `coll` (strings or expressions),
  `timeseries {timeField (required), metaField, granularity, bucketMaxSpanSeconds,
  bucketRoundingSeconds}`;
* **File** (Sluice addition): `connectionName` and `path` (string or expression), the file
  or directory under the File connection's root.

Exactly one target form must be given (`topic`, `db`+`coll`, or `path`). Kinesis (`stream`,
`region`, `partitionKey`) and S3 (`bucket`) fields are refused with `unsupported_option`:
Sluice has no connector for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from pipeline_stages._base import ProblemCode, StageModel, WholeNumber, custom_error, describe
from pipeline_stages._problems import CheckedSpec, ErrorList, given
from pipeline_stages.merge import name_or_expression

if TYPE_CHECKING:
    from pipeline_stages._connectors.sinks.plans import SinkPlan
    from pipeline_stages._stream.context import CompileContext


KEY = "$emit"
OPERATOR_NAME = "EmitOperator"

KeyFormat = Literal["binData", "string", "json", "int", "long"]


class EmitConfig(CheckedSpec):
    """`$emit.config` (Kafka producer options)."""

    acks: Literal["all", -1, 0, 1] = "all"
    compression_type: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "none"
    date_format: Literal["default", "ISO8601"] = Field(default="default", alias="dateFormat")
    headers: Any = None
    key: Any = None
    key_format: KeyFormat | None = Field(default=None, alias="keyFormat")
    output_format: Literal["relaxedJson", "canonicalJson"] = Field(
        default="relaxedJson", alias="outputFormat"
    )
    tombstone_when: Any = Field(default=None, alias="tombstoneWhen")

    @field_validator("acks", mode="before")
    @classmethod
    def _acks(cls, value: Any) -> Any:
        # Literal[1] would take True and 1.0 is what mongosh sends: normalise explicitly.
        if isinstance(value, bool):
            raise custom_error(
                "literal_error", f'acks must be "all", -1, 0 or 1, got {describe(value)}'
            )
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value

    @classmethod
    def _check_raw(cls, raw: Mapping[str, Any], errors: ErrorList) -> None:
        if "key" in raw and not given(raw, "keyFormat"):
            errors.add(("keyFormat",), "missing", "keyFormat is required when key is set", None)


class TimeseriesOptions(StageModel):
    """`$emit.timeseries`: options of the target time-series collection."""

    time_field: str = Field(alias="timeField")
    meta_field: str | None = Field(default=None, alias="metaField")
    granularity: Literal["seconds", "minutes", "hours"] | None = None
    bucket_max_span_seconds: WholeNumber | None = Field(
        default=None, alias="bucketMaxSpanSeconds", ge=1
    )
    bucket_rounding_seconds: WholeNumber | None = Field(
        default=None, alias="bucketRoundingSeconds", ge=1
    )


class EmitSpec(CheckedSpec):
    """The body of `$emit` (Kafka, time-series and File forms)."""

    UNSUPPORTED_OPTIONS = {
        "stream": "Kinesis sinks are not available in Sluice",
        "region": "Kinesis and S3 sinks are not available in Sluice",
        "partitionKey": "Kinesis sinks are not available in Sluice",
        "bucket": "S3 sinks are not available in Sluice; use a File connection and path",
    }

    connection_name: str = Field(alias="connectionName")
    topic: Any = None
    db: Any = None
    coll: Any = None
    timeseries: TimeseriesOptions | None = None
    path: Any = None
    config: EmitConfig = Field(default_factory=EmitConfig)

    _names = field_validator("topic", "db", "coll", "path")(name_or_expression)

    @classmethod
    def _check_raw(cls, raw: Mapping[str, Any], errors: ErrorList) -> None:
        collection = given(raw, "db") or given(raw, "coll")
        forms = [
            name
            for name, on in (
                ("topic", given(raw, "topic")),
                ("db", collection),
                ("path", given(raw, "path")),
            )
            if on
        ]
        if not forms:
            errors.add(
                (),
                "missing",
                "$emit needs a target: topic (Kafka), db and coll (time series) or path (File)",
                dict(raw),
            )
        for extra in forms[1:]:
            errors.add(
                (extra,),
                ProblemCode.INVALID_COMBINATION,
                f"$emit writes to one target; {extra} cannot be combined with {forms[0]}",
                raw.get(extra),
            )
        if collection and given(raw, "db") != given(raw, "coll"):
            absent = "db" if given(raw, "coll") else "coll"
            errors.add(
                (absent,),
                "missing",
                f"$emit to a collection needs both db and coll; {absent} is missing",
                None,
            )
        if given(raw, "timeseries") and not collection:
            errors.add(
                ("timeseries",),
                ProblemCode.INVALID_COMBINATION,
                "timeseries requires db and coll",
                raw["timeseries"],
            )


def compile(spec: EmitSpec, ctx: CompileContext, path: str) -> SinkPlan | None:  # noqa: A001
    """The `$emit` sink plan for the connection's type (`sinks.plans`).

    File connections get JSON-lines files per micro-batch, `Cluster` connections a
    time-series (or plain) collection, `local` a plain collection, Kafka connections the
    Kafka connector's writer (refused with `unsupported_option` in a build without it).
    """
    from pipeline_stages._connectors.sinks.planning import plan_emit

    return plan_emit(spec, connection_of=ctx.connection, path=path, problems=ctx.problems)
