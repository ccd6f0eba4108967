"""The window runtime cores: what the window operator runs per bucket and micro-batch.

Plain Python and pandas, no SparkSession: fixed (tumbling/hopping), session and sliding windows,
the clocks, the inner pipeline's blocking part, and the operator rows they emit.
"""
