"""Registering Sluice's Python data sources with a SparkSession."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline_stages._connectors.sources.change_stream import ChangeStreamDataSource
from pipeline_stages._connectors.sources.documents import DocumentsDataSource
from pipeline_stages._connectors.sources.files import FileDataSource
from pipeline_stages._connectors.sources.http_ingest import HttpIngestDataSource
from pipeline_stages._connectors.sources.kafka import KafkaDataSource
from pipeline_stages._connectors.sources.sample_solar import SampleSolarDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SOURCES = (
    DocumentsDataSource,
    SampleSolarDataSource,
    HttpIngestDataSource,
    KafkaDataSource,
    FileDataSource,
    ChangeStreamDataSource,
)


def register_all(spark: SparkSession) -> None:
    """Register Sluice's Python data sources with a session (idempotent)."""
    for source in SOURCES:
        spark.dataSource.register(source)
