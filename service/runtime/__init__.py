"""Running processors on Spark: the engine interface, the Spark engine, checkpoint locks and pins, cluster helpers."""
