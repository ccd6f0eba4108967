"""Connectors: where documents come from (`sources/`) and where they go (`sinks/`).

Sources are PySpark Python Data Sources that yield raw records; `sources.ingest` turns them into
a stream frame. Sinks are the writers `$merge` and `$emit` compile to. What they need from
storage (document collections, the DLQ, the ingest spool) is declared in `ports` and provided
by the service.
"""
