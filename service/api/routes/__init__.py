"""Thin routers: parse the request, call the manager, present the result."""
