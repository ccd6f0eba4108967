"""The engine: compile a parsed pipeline into one Structured Streaming query and run it.

`plan` chains the stages' `compile` functions over the stream frame, `sink` is the
`foreachBatch` sink that splits a batch's envelopes into results, DLQ records and stats, and
`session` builds the SparkSession.
"""
