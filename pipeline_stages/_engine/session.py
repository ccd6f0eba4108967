"""Building the SparkSession Sluice runs on (one per process: cold start is 15-40 s)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

#: Settings every Sluice session needs, whatever the master.
BASE_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # Stateful operators keep their state in RocksDB: bounded memory, incremental checkpoints.
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Compiled MQL filters produce generated methods above HotSpot's 8000-byte JIT limit;
    # without this flag they stay interpreted (measured: 26.7 vs 18.7 CPU-s per 1M docs).
    # Deeply nested MQL inside `$map`/`$filter` lambdas needs more analyzer iterations than
    # Spark's default 100 (measured: 15 nested operators failed to plan).
    "spark.sql.analyzer.maxIterations": "1000",
    # -Xss: stopping a query while its foreachBatch runs threw StackOverflowError deep in
    # java.util.regex on the stream execution thread (4 in one benchmark run, 0 with 16m);
    # most likely Spark matching the long Python error text when deciding whether the
    # failure was the stop (SPARK-39218).
    "spark.driver.extraJavaOptions": "-XX:-DontCompileHugeMethods -Xss16m",
    "spark.executor.extraJavaOptions": "-XX:-DontCompileHugeMethods",
}


def build_session(
    *,
    master: str = "local[*]",
    app_name: str = "sluice",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Get or create the process's SparkSession with Sluice's settings.

    Spark starts Python workers with `python3` from PATH unless told otherwise, which may not
    be the interpreter Sluice is installed in; pin workers to this interpreter.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**BASE_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("SLUICE_SPARK_LOG_LEVEL", "ERROR"))
    return session
