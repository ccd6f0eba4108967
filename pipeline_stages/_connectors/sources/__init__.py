"""Sources as PySpark Python Data Sources: each yields raw records with an arrival sequence.

Every source produces the same row shape (`RAW_SCHEMA`), so the `$source` stage can parse,
time-stamp and validate documents the same way whatever the connection type:

- `part`: the source partition (0 for unpartitioned sources);
- `seq`: the arrival sequence within the partition, deterministic across replays, so results
  do not depend on micro-batch boundaries and DLQ ids are stable;
- `raw`: the message text (JSON expected; anything else goes to the DLQ);
- `source_ts_ms`: the source's own timestamp (Kafka message time, generation time), used when
  the pipeline has no `timeField`;
- `meta`: JSON of the source-specific `_stream_meta.source` fields;
- `error`: why the record goes to the DLQ before Spark parses it (bytes that are not UTF-8,
  an invalid Extended JSON wrapper, ...: `records.source_record`), or NULL.

The schema is `raw_source.RAW_SCHEMA`; `register.register_all` registers every source with a
session.
"""
