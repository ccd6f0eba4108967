"""Sink writers: what `$merge` and `$emit` compile to, and the writers that apply them.

A sink stage compiles to a frozen *plan* (`sinks.plans`: pure data, no Spark), which the
runner (`sluice process`, the service's `ProcessorWriter`) turns into a `SinkWriter` with
`sinks.dispatch.build_sink_writer`. Writers receive whole micro-batches (`BatchResult`) and
return the DLQ records of the documents they could not write (`operatorName` `MergeOperator`
or `EmitOperator`), so a per-document write error never stops the query.

Modules: `plans` (the plans), `planning` (spec and connection type to plan, collecting
`{code, path, message}` problems), `targets` (per-document `db`/`coll`/`path` computed as Spark
columns upstream and read back here), `ids` (deterministic `_id`s for exactly-once effects),
`merge_writer` (`$merge` on `local` and `Cluster`), `file_writer` (`$emit` to a File
connection), `collection_writer` (`$emit` to a collection / time series), `dispatch`;
`kafka` (`$emit` to Kafka) belongs to the Kafka connector.
"""
