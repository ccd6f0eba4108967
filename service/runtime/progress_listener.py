"""The service's streaming query listener: every query's progress, as Spark's own JSON.

PySpark's `StreamingQueryListener` hands Python a `QueryProgressEvent` converted from the
Java object field by field, each field a py4j call (maps are walked key by key, and each
walk ends with a Java exception PySpark converts through more calls). For a Sluice window
query's progress that took 78 ms a batch (median of 20, the latency benchmark through the
service, `benchmarks/RESULTS.md`), on the listener bus and the driver's cores, while the
progress's JSON text, which is all the service reads, comes in one call (~1 ms).

So the listener is registered on the JVM directly, with Spark's Python listener wrapper
(`PythonStreamingQueryListenerWrapper`, what `StreamingQueryListener` registers too) around a
py4j proxy that reads `progress().json()` and nothing else.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pyspark.java_gateway import ensure_callback_server_started

from service.runtime.engine import ProgressCallback

log = logging.getLogger("sluice.service")


class JsonProgressListener:
    """The Java `PythonStreamingQueryListener` interface, for py4j; runs on Spark's listener
    bus thread and never raises into it. The callback gets `(query id, progress)`: a finished
    batch's progress as Spark's JSON, or `{"idle": true, "timestamp": ...}` when the query
    reports it has nothing to do."""

    def __init__(self, callback: ProgressCallback) -> None:
        self.callback = callback

    def onQueryStarted(self, jevent: Any) -> None:  # noqa: N802 - Spark's name
        """Nothing to do."""

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802 - Spark's name
        """Hand a finished batch's progress over."""
        try:
            progress = json.loads(jevent.progress().json())
            self.callback(str(progress.get("id")), progress)
        except Exception:  # noqa: BLE001 - a listener must not break the bus
            log.exception("progress listener failed")

    def onQueryIdle(self, jevent: Any) -> None:  # noqa: N802 - Spark's name
        """Report that the query has nothing to do."""
        try:
            self.callback(
                str(jevent.id().toString()), {"idle": True, "timestamp": str(jevent.timestamp())}
            )
        except Exception:  # noqa: BLE001 - a listener must not break the bus
            log.exception("idle listener failed")

    def onQueryTerminated(self, jevent: Any) -> None:  # noqa: N802 - Spark's name
        """The supervisor polls queries; nothing to do here."""

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def add_progress_listener(session: Any, callback: ProgressCallback) -> Any:
    """Register `callback` for every query of `session`; returns the JVM listener (for
    `session._jsparkSession.streams().removeListener`)."""
    gateway = session.sparkContext._gateway
    ensure_callback_server_started(gateway)
    wrapper = session._jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper
    listener = wrapper(JsonProgressListener(callback))
    session._jsparkSession.streams().addListener(listener)
    return listener
