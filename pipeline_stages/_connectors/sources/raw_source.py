"""The one shape of Sluice's Spark data sources: a format name, `RAW_SCHEMA`, a stream reader.

Each source module defines its stream reader (offsets, partitions, `read`) and declares the
data source as a subclass naming its format and reader class; what Spark needs around that is
the same for every source and lives here.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from pyspark.sql.datasource import DataSource, DataSourceStreamReader
from pyspark.sql.types import StructType

from pipeline_stages._connectors.sources.throttled import (
    THROTTLE_OPTION,
    ThrottledStreamReader,
    decode_limits,
)

#: The row every source yields (see the package docstring for the fields).
RAW_SCHEMA = "part INT, seq BIGINT, raw STRING, source_ts_ms BIGINT, meta STRING, error STRING"


def task_slots(spark: Any) -> int:
    """How many tasks run at once (`defaultParallelism`: the executors' cores), which a
    source may split a large micro-batch into; 1 where the session cannot tell (Connect)."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # noqa: BLE001 - no SparkContext (Spark Connect, stubs): no split
        return 1


def read_tasks(ctx: Any) -> int:
    """How many tasks a source may cut a micro-batch into: the pipeline's
    (`CompileContext.source_tasks`), else the session's task slots."""
    return getattr(ctx, "source_tasks", None) or task_slots(ctx.spark)


class StreamReaderClass(Protocol):
    """A stream reader class: built from the data source's options."""

    def __call__(self, options: dict[str, str]) -> DataSourceStreamReader: ...


class RawRecordSource(DataSource):
    """A streaming source of raw records (`RAW_SCHEMA`); options go to the reader as given.

    Attributes:
        format_name: The name given to `spark.readStream.format(...)`.
        stream_reader: The stream reader class, constructed from the options (Spark
            lower-cases option keys). Not `reader`: that is `DataSource`'s batch-reader
            method, which Spark calls for `spark.read`.
    """

    format_name: ClassVar[str]
    stream_reader: ClassVar[StreamReaderClass]

    @classmethod
    def name(cls) -> str:
        """The format name Spark knows this source by."""
        return cls.format_name

    def schema(self) -> str:
        """The common raw-record schema of all Sluice sources."""
        return RAW_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: ARG002
        """A new reader for one query (Spark builds one per query start), wrapped in the
        pipeline's `$throttle` when the options carry one (`throttled`)."""
        options = dict(self.options)
        reader = type(self).stream_reader(options)
        limits = options.get(THROTTLE_OPTION)
        if limits:
            return ThrottledStreamReader(reader, decode_limits(limits))
        return reader
