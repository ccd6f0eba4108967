"""The Spark side shared by all stages: session, the stream frame, sources, sinks."""
