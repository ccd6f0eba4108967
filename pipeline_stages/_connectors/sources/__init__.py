"""Sources as PySpark Python Data Sources: each yields raw records with an arrival sequence.

Every source produces the same row shape (`RAW_SCHEMA`), so the `$source` stage can parse,
time-stamp and validate documents the same way whatever the connection type:

- `part`: the source partition (0 for unpartitioned sources);
- `seq`: the arrival sequence within the partition, deterministic across replays, so results
  do not depend on micro-batch boundaries and DLQ ids are stable;
- `raw`: the message text (JSON expected; anything else goes to the DLQ);
- `source_ts_ms`: the source's own timestamp (Kafka message time, generation time), used when
  the pipeline has no `timeField`;
- `meta`: JSON of the source-specific `_stream_meta.source` fields.
"""

RAW_SCHEMA = "part INT, seq BIGINT, raw STRING, source_ts_ms BIGINT, meta STRING"


def register_all(spark: object) -> None:
    """Register Sluice's Python data sources with a session (idempotent)."""
    from pipeline_stages._connectors.sources.change_stream import ChangeStreamDataSource
    from pipeline_stages._connectors.sources.documents import DocumentsDataSource
    from pipeline_stages._connectors.sources.files import FileDataSource
    from pipeline_stages._connectors.sources.http_ingest import HttpIngestDataSource
    from pipeline_stages._connectors.sources.kafka import KafkaDataSource
    from pipeline_stages._connectors.sources.sample_solar import SampleSolarDataSource

    sources = (DocumentsDataSource, SampleSolarDataSource, HttpIngestDataSource, KafkaDataSource)
    for source in (*sources, FileDataSource, ChangeStreamDataSource):
        spark.dataSource.register(source)  # type: ignore[attr-defined]
