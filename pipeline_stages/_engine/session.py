"""Building the SparkSession Sluice runs on (one per process: cold start is 15-40 s)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from pipeline_stages._engine import class_archive

DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"

#: Settings every Sluice session needs, whatever the master.
BASE_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # Stateful operators keep their state in RocksDB: bounded memory, incremental checkpoints.
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    # A commit uploads the batch's changes, not a snapshot of the whole store (snapshots are
    # made in the background): a 1-document window batch's addBatch 735/608 -> 609/561 ms.
    # Checkpoints move between both formats, either way (Spark's RocksDB documentation).
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Spark's default checkpoint file manager renames through Hadoop's FileContext, which on
    # the local file system (no native Hadoop library) forks `readlink` and `chmod` per file:
    # 20 % of the stream thread's time in a 1-document window batch was in those forks. The
    # FileSystem-based manager renames with one POSIX rename (atomic on a local or shared
    # file system, where Sluice's checkpoints live), for the offset and commit logs and the
    # state store's files alike: walCommit + commitOffsets 272 -> 70 ms, a window batch 2.3
    # -> 1.8 s, a native window batch 1.0 -> 0.7 s (RESULTS.md, sixth session).
    "spark.sql.streaming.checkpointFileManagerClass": (
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
    ),
    # PySpark's DataFrame debugging records the Python call site of every Column function
    # in the JVM (5 extra py4j round trips each). Sluice compiles MQL into thousands of
    # Column calls and reports its own errors with JSON paths: off, compiling 85 arithmetic
    # expressions made 41k round trips instead of 88k, in ~0.6x the time (RESULTS.md).
    "spark.python.sql.dataFrameDebugging.enabled": "false",
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
    # A 16 MB document (MongoDB's limit) needs 600-800 MB of heap on its way through one
    # processor (VARIANT, its JSON text as UTF-16, Jackson's doubling buffer, the Arrow batch
    # to the sink's worker), and in local mode the executors share the driver's heap: with
    # Spark's 1g default, a long-running JVM died of OutOfMemoryError with every query on it
    # (RESULTS.md, ninth session). A ceiling, not a reservation; a setting overrides it.
    "spark.driver.memory": "2g",
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
    be the interpreter Sluice is installed in; pin workers to this interpreter. The driver's
    JVM maps the machine's class-data archive when there is one (`class_archive`).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings = {**BASE_CONF, **(conf or {})}
    java_options = class_archive.driver_java_options(settings.get(DRIVER_JAVA_OPTIONS))
    if java_options is not None:
        settings[DRIVER_JAVA_OPTIONS] = java_options
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("SLUICE_SPARK_LOG_LEVEL", "ERROR"))
    return session


NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"
#: How long a query with a 0 s trigger waits before it looks for new input again.
POLLING_DELAY = "spark.sql.streaming.pollingDelay"
#: Held while the shared session's SQL conf changes around a query's start (`start_query`)
#: and while a pipeline is compiled on that session (the service's compiles): analysing a
#: Python data source copies the conf map, and a copy made while another thread set a key
#: failed with `ConcurrentModificationException` (a processor created while another started
#: was refused with `compile_error`). Reentrant: a compile may start a query under it.
SESSION_CONF_LOCK = threading.RLock()


#: Spark's shuffle partitions; a stateful operator's state partitions in a new checkpoint.
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
#: Spark 4's state partitions of a new checkpoint when set (else the shuffle partitions'). It
#: turned up set on the shared session in a test process (2, from an earlier query), where
#: it overrode the shuffle partitions a query started with: `stream_settings` sets it too.
STATE_STORE_PARTITIONS = "spark.sql.streaming.internal.stateStore.partitions"
EXCLUDED_RULES = "spark.sql.optimizer.excludedRules"
#: Optimizer rules with nothing to do in Sluice's compiled plans, which Structured Streaming
#: optimizes again in every micro-batch: every filter is fenced from pushdown
#: (`frame.filter_rows`), so predicate pushdown and filter pruning find nothing to move or
#: fold. In the one-document window query they ran 6-7 times a batch each and never changed
#: the plan; leaving them out took its optimization from 69 to 43 ms a batch (RESULTS.md,
#: tenth session). Optimizer rules keep a plan's results, so leaving some out cannot change
#: them (Spark refuses to leave out the rules that are needed).
NO_OP_RULES = (
    "org.apache.spark.sql.catalyst.optimizer.PushDownPredicates",
    "org.apache.spark.sql.catalyst.optimizer.RemoveRedundantAliases",
    "org.apache.spark.sql.catalyst.optimizer.PruneFilters",
)


def stream_settings(spark: SparkSession, state_partitions: int | None) -> dict[str, str]:
    """The session settings a Sluice streaming query starts with: `NO_OP_RULES` left out of
    the optimizer (besides any the session leaves out) and, with `state_partitions`, that many
    shuffle partitions (None: the session's), the state partitions the same. Only a new
    checkpoint takes the partition count: Spark restores an existing one's from its offset
    log, which the state store's partitioning must keep."""
    session_rules = (spark.conf.get(EXCLUDED_RULES, None) or "").split(",")
    rules = [rule.strip() for rule in session_rules if rule.strip()]
    rules += [rule for rule in NO_OP_RULES if rule not in rules]
    settings = {EXCLUDED_RULES: ",".join(rules)}
    if state_partitions is not None:
        settings[SHUFFLE_PARTITIONS] = str(state_partitions)
    # The state partitions follow the shuffle partitions, whatever the session holds.
    settings[STATE_STORE_PARTITIONS] = settings.get(
        SHUFFLE_PARTITIONS, spark.conf.get(SHUFFLE_PARTITIONS, None) or "200"
    )
    return settings


@contextmanager
def query_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Set `settings` on the shared session for the block (a query's `start()`, which copies
    the session's SQL conf), under `SESSION_CONF_LOCK`; the previous values are restored."""
    with SESSION_CONF_LOCK:
        previous = {key: spark.conf.get(key, None) for key in settings}
        for key, value in settings.items():
            spark.conf.set(key, value)
        try:
            yield
        finally:
            for key, before in previous.items():
                if before is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, before)


def start_query(
    writer: DataStreamWriter,
    spark: SparkSession,
    *,
    idle_batches: bool,
    interval_ms: int | None = None,
    state_partitions: int | None = None,
) -> StreamingQuery:
    """Start `writer`'s query; Spark runs micro-batches without input only when `idle_batches`.

    A window query with processing-time timeouts in its plan (one that needs them, or a
    checkpoint that started with them: `CompiledPipeline.window_timers`) makes Spark run a
    micro-batch on every trigger even without input: ~0.7 s of CPU each here, about a core
    for an idle processor on a 1 s trigger. Only a window that closes on the wall clock
    (`CompiledPipeline.runs_when_idle`) needs them.

    With `interval_ms` the trigger is set here too. A query that needs idle micro-batches
    runs one every `interval_ms` (its clock's tick). Any other query runs its micro-batches
    back to back while input is waiting, and looks for new input every `interval_ms` when
    there is none (Spark's polling delay): a fixed processing-time trigger would make each
    micro-batch wait for the next tick, capping a backlog at `maxOffsetsPerTrigger` rows
    per interval (10k rows/s at the defaults) whatever the machine could do.

    `state_partitions`: the shuffle partitions a new checkpoint starts with
    (`CompiledPipeline.state_partitions`; None: the session's); see `stream_settings`.

    A query copies the session's SQL conf when it starts, so the settings are made around
    `start()`, under a lock: queries started from other threads must not pick up each
    other's values.
    """
    settings = {NO_DATA_BATCHES: "true" if idle_batches else "false"}
    if interval_ms is not None:
        if idle_batches:
            writer = writer.trigger(processingTime=f"{interval_ms} milliseconds")
        else:
            writer = writer.trigger(processingTime="0 seconds")
            settings[POLLING_DELAY] = f"{interval_ms}ms"
    settings.update(stream_settings(spark, state_partitions))
    with query_settings(spark, settings):
        return writer.start()
