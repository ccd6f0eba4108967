"""The Spark side of a window stage: compile it into one stateful operator over the stream frame."""
