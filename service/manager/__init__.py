"""The processor manager: definitions, the lifecycle state machine, runs, stats, DLQ and ingest."""
