"""MQL expression operators compiled to Spark Columns, one module per family (`$add` in `arithmetic`, ...)."""
