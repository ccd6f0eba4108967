"""MQL query filters (`$match`, `$validate`, `$jsonSchema`) compiled to native Spark predicates."""
