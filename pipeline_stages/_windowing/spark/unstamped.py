"""When a window may read the source's documents before the source stamps them.

A source stamps every document with its event time and stream metadata (`ingest`); in Spark
that rewrite of every document cost more than the window's own columns
(`benchmarks/RESULTS.md`: ~0.4 s of a 1.4 s micro-batch of 125k JSON documents). A window
that is the pipeline's first stage and reads neither the stamped fields nor the whole
document gives the same results on the unstamped documents: its `$group` key and inputs are
the same values. Only the copies of documents it sends to the DLQ show the difference, so
those are stamped where they are made: a late document's in Python, when the operator or the
batch engine renders it (`runtime.stamp`), and a document that failed inside the window here,
in Spark, for the failing rows only.

Both engines do this by default; the Spark conf `spark.sluice.window.unstampedReads=false`
turns it off (every document is stamped in Spark, as before), for comparisons.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pyspark.sql import functions as F

from pipeline_stages._connectors.sources.ingest import existing_meta, stamped_doc
from pipeline_stages._stream.frame import DOC, META, StreamFrame, Unstamped
from pipeline_stages._windowing.runtime import config as C

#: Spark conf: "false" stamps every document before the window (see the module doc).
UNSTAMPED_CONF = "spark.sluice.window.unstampedReads"
#: What reads the whole document, besides the stamped fields' names.
_WHOLE_DOCUMENT = ("$$ROOT", "$$CURRENT")


def unstamped_reads(spark: Any) -> bool:
    """Whether windows may read unstamped documents (`UNSTAMPED_CONF`, default true)."""
    return str(spark.conf.get(UNSTAMPED_CONF, "true")).strip().lower() != "false"


def unstamped_input(
    frame: StreamFrame, entering: Sequence[Any], partition_by: Any
) -> Unstamped | None:
    """The source's unstamped frame when the window may read it (None: it may not).

    `frame` is what reaches the window (only the source's own frame has an unstamped form);
    `entering` the inner stages every document goes through: `$match`es, then the first
    `$group` or `$count` (a window without one emits documents, which must be stamped). No
    stage may name a stamped field or the whole document anywhere, keys or values, nor may
    `partitionBy`: a conservative test, a false alarm only costs the stamping."""
    unstamped = frame.unstamped
    if unstamped is None or not entering:
        return None
    *prefix, first = entering
    if first.key not in ("$group", "$count") or any(s.key != "$match" for s in prefix):
        return None
    specs = [s.spec.model_dump(mode="json", by_alias=True) for s in entering]
    text = json.dumps([specs, partition_by], default=str)
    names = [n for n in (unstamped.ts_field, unstamped.meta_field) if n] + list(_WHOLE_DOCUMENT)
    if any(name in text for name in names):
        return None
    return unstamped


def stamped_failures(shipped: tuple[Any, list[str]], unstamped: Unstamped) -> tuple[Any, list[str]]:
    """The operator's input columns (`spark.compile._shipped`) over unstamped documents,
    made as over stamped ones: a document that failed inside the window is copied stamped,
    and each row with a late-document copy (`C.ORIG`) ships its stream metadata (`C.OMETA`)
    for stamping it."""
    df, columns = shipped
    doc = F.col(DOC)
    stamped = stamped_doc(
        doc,
        existing_meta(doc, unstamped.meta_field) if unstamped.meta_field else None,
        ts_field=unstamped.ts_field,
        meta_field=unstamped.meta_field,
    )
    failed_inside = F.col(C.FLAG) == C.FLAG_FAILED_INSIDE
    df = df.withColumns(
        {
            C.FDOC: F.when(failed_inside, F.to_json(stamped)).otherwise(F.col(C.FDOC)),
            C.OMETA: F.when(F.col(C.ORIG).isNotNull(), F.col(META)),
        }
    )
    return df, [*columns, C.OMETA]
