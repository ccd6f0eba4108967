"""The job whose loaded classes become the JVM class-data archive (see `class_archive.py`).

It touches what a Sluice query uses (JSON and variant expressions, aggregation, Arrow
batches to Python workers, a stateful streaming query on the RocksDB state store) so that
those classes are in the archive too; a class not in it simply loads as usual. Run by
`spark-submit`, it imports nothing of Sluice's.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def _identity(batches: Iterator[object]) -> Iterator[object]:
    yield from batches


def main() -> None:
    spark = (
        SparkSession.builder.appName("sluice-class-archive")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        .getOrCreate()
    )
    docs = spark.createDataFrame([('{"k": "a", "v": 1}',), ('{"k": "b", "v": 2.5}',)], ["json"])
    doc = F.parse_json("json")
    rows = docs.select(
        F.try_variant_get(doc, "$.k", "string").alias("k"),
        F.try_variant_get(doc, "$.v", "double").alias("v"),
        F.to_json(doc).alias("text"),
        F.from_json("json", "k string, v double").alias("typed"),
    )
    rows.groupBy("k").agg(F.sum("v"), F.count("*")).collect()
    rows.mapInArrow(_identity, rows.schema).collect()
    with tempfile.TemporaryDirectory() as work:
        inputs = f"{work}/in"
        stamped = docs.withColumn("t", F.current_timestamp())
        stamped.write.json(inputs)
        counts = (
            spark.readStream.schema(stamped.schema)
            .json(inputs)
            .withWatermark("t", "1 second")
            .groupBy(F.window("t", "1 second"))
            .count()
        )
        query = (
            counts.writeStream.format("memory")
            .queryName("sluice_class_archive")
            .outputMode("append")
            .option("checkpointLocation", f"{work}/checkpoint")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
