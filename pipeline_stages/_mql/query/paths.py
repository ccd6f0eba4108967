"""Field conditions and MongoDB's array-traversal rules for dotted query paths.

A query on `a.b` considers every value the path reaches (MongoDB's `ElementPath`):

* through an object, the path continues into the named field; a scalar or missing value on
  the way yields *missing* (so `{"a.b": null}` matches `{a: 4}`);
* through an array, the path continues into every element that is an object; other elements
  are skipped, and an array none of whose elements yields anything yields nothing at all (so
  `{"a.b": null}` does not match `{a: [1, 2]}` but `{"a.b": {$ne: null}}` does; this is
  MongoDB 8.0's behaviour). A numeric component (`a.0.b`) also selects that element by
  position, when it is an object or array (or whatever it is, at the end of the path);
* at the end of the path, most operators test the value and, when it is an array, each of
  its elements (`{a: 5}` matches `{a: [1, 5]}`); a value reached by position is not
  expanded; `$size`, `$elemMatch` and `$exists` never expand.

A field matches when any reached value passes the test. Negative operators (`$ne`, `$nin`,
`$not`, `$exists: false`) negate the whole positive match, as MongoDB does.

How it compiles: per path, `Paths` builds one array of the reached values, each typed once
(`typed_array`), and every operator on the path is one `exists` over that same array. The
array expression is built once per path and shared, so Spark computes it once per row, and the
generated code grows linearly with the filter (nested per-operator traversals made Spark's
generated methods too large to JIT-compile).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._mql.query.compare import Test
from pipeline_stages._mql.query.values import (
    Typed,
    array_index,
    as_array,
    get_field,
    get_index,
    is_any_object,
    typed_array,
)
from pipeline_stages._mql.scope import Scope


@dataclass
class Paths:
    """The reached-values arrays of one compilation, built once per (document, path, mode).

    Arrays over the scope's document are materialised through `Scope.bind` (computed once
    per row even where Spark would not de-duplicate them); arrays over an `$elemMatch`
    element live inside a lambda and are shared by reference only.
    """

    scope: Scope
    _cache: dict[tuple[int, tuple[str, ...], bool], tuple[Column, Column]] = field(
        default_factory=dict
    )

    def reached(self, doc: Column, parts: Sequence[str], *, expand: bool) -> Column:
        """`ARRAY<STRUCT<v, j>>` of the values `parts` reaches in `doc` (see module doc)."""
        key = (id(doc), tuple(parts), expand)
        if key not in self._cache:
            values = typed_array(_reach(doc, parts, expand=expand))
            if doc is self.scope.current:
                values = self.scope.bind(values)
            # The cache holds `doc` too, so its id cannot be reused while the entry lives.
            self._cache[key] = (values, doc)
        return self._cache[key][0]


class FieldCond:
    """A compiled field condition: applied along a path, or to one value (`$elemMatch`)."""

    def on_path(self, paths: Paths, doc: Column, parts: Sequence[str]) -> Column:
        """Whether the field at `parts` of document `doc` matches."""
        raise NotImplementedError

    def on_value(self, value: Typed) -> Column:
        """Whether one value matches (no path, no array expansion)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Leaf(FieldCond):
    """One operator's test; `expand` also tests the elements of an array at the path's end."""

    test: Test
    expand: bool = True

    def on_path(self, paths: Paths, doc: Column, parts: Sequence[str]) -> Column:
        """Whether any value the path reaches passes the test."""
        values = paths.reached(doc, parts, expand=self.expand)
        found = F.exists(values, lambda typed: self.test(Typed.of_struct(typed)))
        return F.coalesce(found, F.lit(False))

    def on_value(self, value: Typed) -> Column:
        """Whether the value itself passes the test."""
        return self.test(value)


@dataclass(frozen=True)
class Negated(FieldCond):
    """`$not`, `$ne`, `$nin`, `$exists: false`: the negation of a positive condition."""

    inner: FieldCond

    def on_path(self, paths: Paths, doc: Column, parts: Sequence[str]) -> Column:
        """True where the positive condition does not match the field."""
        return ~self.inner.on_path(paths, doc, parts)

    def on_value(self, value: Typed) -> Column:
        """True where the positive condition does not match the value."""
        return ~self.inner.on_value(value)


@dataclass(frozen=True)
class AllOf(FieldCond):
    """Several operators on one field (`{$gt: 1, $lt: 5}`, `$all`): each must match."""

    conds: tuple[FieldCond, ...]

    def on_path(self, paths: Paths, doc: Column, parts: Sequence[str]) -> Column:
        """Each condition matches the field (not necessarily through the same element)."""
        return conjoin([c.on_path(paths, doc, parts) for c in self.conds])

    def on_value(self, value: Typed) -> Column:
        """Each condition matches the value."""
        return conjoin([c.on_value(value) for c in self.conds])


def conjoin(columns: Sequence[Column]) -> Column:
    """AND of the columns (True for none)."""
    if not columns:
        return F.lit(True)
    result = columns[0]
    for column in columns[1:]:
        result = result & column
    return result


def first_step(doc: Column, part: str) -> Column:
    """Field `part` of the document being matched.

    Inside `$elemMatch` the "document" may be an array, whose fields are its positions.
    """
    index = array_index(part)
    if index is None:
        return get_field(doc, part)
    return F.coalesce(get_field(doc, part), get_index(doc, index))


def _reach(doc: Column, parts: Sequence[str], *, expand: bool) -> Column:
    """`ARRAY<VARIANT>` of the values reached (SQL NULL elements stand for missing)."""
    first = first_step(doc, parts[0])
    if len(parts) == 1:
        return _expanded(first) if expand else F.array(first)
    last = len(parts) - 1
    index = array_index(parts[-1])
    # The first step starts from one value; later steps from every value reached so far.
    level = _step(first, parts[1], last == 1)
    by_position = _picked(first, index) if last == 1 and index is not None else None
    for depth in range(2, len(parts)):
        if depth == last and index is not None:
            by_position = F.flatten(F.transform(level, lambda v: _picked(v, index)))
        level = F.flatten(F.transform(level, _stepper(parts[depth], depth == last)))
    if expand:
        level = F.flatten(F.transform(level, _expanded))
    return level if by_position is None else F.concat(level, by_position)


def _stepper(part: str, at_end: bool) -> Callable[[Column], Column]:
    # PySpark reads a lambda's arity to pick its arguments: no default-argument binding.
    return lambda value: _step(value, part, at_end)


def _step(value: Column, part: str, at_end: bool) -> Column:
    """The values one more path component reaches from `value`."""
    elements = as_array(value)
    through = F.transform(F.filter(elements, is_any_object), lambda e: get_field(e, part))
    index = array_index(part)
    if index is not None and not at_end:
        # Positional selection continues only into an object or array element.
        picked = get_index(value, index)
        container = is_any_object(picked) | as_array(picked).isNotNull()
        through = F.concat(through, F.filter(F.array(picked), lambda _: container))
    return F.when(elements.isNotNull(), through).otherwise(F.array(get_field(value, part)))


def _picked(value: Column, index: int) -> Column:
    """The element a final numeric component selects: tested as is, without expansion."""
    return F.filter(F.array(get_index(value, index)), lambda e: e.isNotNull())


def _expanded(value: Column) -> Column:
    """A value at the end of the path and, when it is an array, its elements."""
    elements = as_array(value)
    return F.when(elements.isNotNull(), F.concat(elements, F.array(value))).otherwise(
        F.array(value)
    )
