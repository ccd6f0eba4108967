"""Documents in plain Python: MQL values (types, order, equality, paths) and Extended JSON.

The one place that knows how a BSON value looks as a Python object and as Extended JSON. The
window runtime, the sinks, the stores and the conformance reference model all use it; it
imports neither Spark nor the server.
"""
