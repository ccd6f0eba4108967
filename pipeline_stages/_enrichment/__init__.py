"""The enrichment runtime: `$lookup`/`$cachedLookup` and `$https` on the executors.

`matching` holds MQL's equality-join rules in plain Python, `cache` the per-executor
`$cachedLookup` cache, `lookup_runner` the per-partition function Spark calls
(`mapInArrow`), `lookup_compile` and `https_compile` the Spark side of the stages.
"""
