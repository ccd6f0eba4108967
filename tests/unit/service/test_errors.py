"""Store errors that no manager method translated become API errors (`from_store_error`)."""

from __future__ import annotations

import sqlite3

from pymongo.errors import OperationFailure

from pipeline_stages._base import Problem
from service.errors import RequestInvalid, StoreUnavailable, from_store_error
from service.stores import InvalidDocument


def test_a_store_error_keeps_its_problem() -> None:
    error = from_store_error(InvalidDocument("naive datetime", path="/doc/at"))
    assert isinstance(error, RequestInvalid)
    assert error.problems == [Problem("invalid_document", "/doc/at", "naive datetime")]


def test_driver_errors_are_unavailable_stores_without_problems() -> None:
    # PyMongo's OperationFailure has a numeric `code` and no `path`: it once crashed here.
    for raised in (OperationFailure("not primary", code=10107), sqlite3.OperationalError("io")):
        error = from_store_error(raised)
        assert isinstance(error, StoreUnavailable)
        assert error.problems == []
