"""MQL on Spark: aggregation expressions and query filters compiled to native Columns.

`values` fixes how MQL values are encoded in VARIANT columns; `expressions` compiles
aggregation expressions to `Expr` (value + per-document error); `query` compiles query filters
(`$match`, `$validate`) to `Predicate`s.
"""
