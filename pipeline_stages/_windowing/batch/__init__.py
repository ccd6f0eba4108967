"""The batch window engine: the window runtime run per micro-batch in the driver, with its log and state on disk."""
