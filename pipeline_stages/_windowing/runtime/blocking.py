"""The blocking part of a window's inner pipeline, run in Python when a window closes.

`GroupRuntime` folds one document's evaluated `$group` inputs into the partial states of the
shared accumulator classes (`_windowing.accumulators`), so the Spark operator and the
reference executor aggregate with the same code. `finish_*` build a closed window's output:
`$group` results get `_id`, `_stream_meta: {source: {type}, window}` and the fields, as in
Atlas's doc examples; `$count` results are `{<field>: n}` only; buffered documents come out
with the window in their stream metadata. The blocking stages after the first one (`$sort`,
`$limit`, `$count`, simple `$group`, and with `trigger` a `$match` the operator can evaluate:
`runtime.query`) then run on those documents.

Outputs are `(key, document)` pairs: the key (the group key's JSON, or the document's source
position) becomes the envelope's `window_key`, which makes sink ids deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from json.encoder import encode_basestring as _string
from operator import itemgetter
from typing import Any

from pipeline_stages._documents.values import (
    MISSING,
    get_path,
    set_path,
    sort_key,
)
from pipeline_stages._windowing.accumulators import Accumulator, make_accumulator
from pipeline_stages._windowing.accumulators.collect import Push
from pipeline_stages._windowing.accumulators.ordered import parse_sort_spec, sort_value_key
from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.query import matches
from pipeline_stages._windowing.runtime.values import decode_json, encode, with_window

Output = tuple[str, Any]


def key_text(value: Any) -> str:
    """Deterministic text of a group key (the envelope's `window_key`)."""
    return encode(value)


class GroupRuntime:
    """The accumulators of one `$group`, with helpers to fold, merge and finalize groups.

    A group is `[first_order, key_value, [state per accumulator]]`; groups of a window live in
    a dict keyed by the key's BSON sort key, so `1` and `1.0` share a group as in MongoDB.
    """

    def __init__(self, plan: C.GroupPlan) -> None:
        self.plan = plan
        self.accs: list[Accumulator] = [make_accumulator(a.op, a.spec) for a in plan.accumulators]

    def new_group(self, order: int, key: Any) -> list[Any]:
        """A group with fresh states, first seen at `order`."""
        return [order, key, [acc.init() for acc in self.accs]]

    def add(self, group: list[Any], inputs: Sequence[Sequence[Any]], order: int) -> None:
        """Fold one document: `inputs[a]` are accumulator `a`'s values (argument, sort values)."""
        states = group[2]
        for a, acc in enumerate(self.accs):
            values = inputs[a]
            value = values[0] if values else MISSING
            doc = self._sort_doc(a, values) if len(values) > 1 else None
            states[a] = acc.add(states[a], value, order=order, doc=doc)

    def _sort_doc(self, a: int, values: Sequence[Any]) -> dict[str, Any]:
        doc: dict[str, Any] = {}
        for name, value in zip(self.plan.accumulators[a].sort_fields, values[1:], strict=True):
            if value is not MISSING:
                set_path(doc, name, value)
        return doc

    def merge_into(self, groups: dict[Any, list[Any]], norm: Any, other: list[Any]) -> None:
        """Merge group `other` into `groups[norm]` (sessions merging, batch partials)."""
        mine = groups.get(norm)
        if mine is None:
            groups[norm] = other
            return
        if other[0] < mine[0]:
            mine[0], mine[1] = other[0], other[1]
        mine[2] = [acc.merge(x, y) for acc, x, y in zip(self.accs, mine[2], other[2], strict=True)]

    def outputs(
        self,
        groups: Mapping[Any, list[Any]],
        *,
        window: dict[str, Any],
        source: C.WindowSource,
    ) -> list[Output]:
        """Finalized documents of a closed window's groups, in first-arrival order."""
        ordered = sorted(groups.values(), key=lambda g: g[0])
        out: list[Output] = []
        for _, key, states in ordered:
            fields = {
                plan.name: self._finalize(acc, plan, state, window, source)
                for acc, plan, state in zip(self.accs, self.plan.accumulators, states, strict=True)
            }
            if self.plan.count_field is not None:
                out.append((key_text(key), fields))
                continue
            doc: dict[str, Any] = {"_id": key}
            if source.meta_field:
                doc[source.meta_field] = {"source": {"type": source.source_type}, "window": window}
            doc.update(fields)
            out.append((key_text(key), doc))
        return out

    def output_texts(
        self,
        groups: Mapping[Any, list[Any]],
        *,
        window: dict[str, Any],
        meta_text: str,
        source: C.WindowSource,
    ) -> list[tuple[str, str]]:
        """`outputs` encoded straight to JSON text (no stages follow): the hot path.

        Column by column: each accumulator finalizes and encodes all groups at once, then one
        %-format per group joins the texts (measured on 1000 keys x 3 accumulators: 2.4x faster
        than encoding group by group).
        """
        ordered = sorted(groups.values(), key=_first_order)
        keys = encode_values([group[1] for group in ordered])
        columns = []
        for a, (acc, plan) in enumerate(zip(self.accs, self.plan.accumulators, strict=True)):
            states = [group[2][a] for group in ordered]
            if plan.root_input:
                values = [self._finalize(acc, plan, state, window, source) for state in states]
            else:
                values = finalize_all(acc, states)
            columns.append(encode_values(values))
        fields = ",".join(
            encode(plan.name).replace("%", "%%") + ":%s" for plan in self.plan.accumulators
        )
        if self.plan.count_field is not None:
            template = "{" + fields + "}"
            return [(row[0], template % row[1:]) for row in zip(keys, *columns, strict=True)]
        head = f',"{source.meta_field}":{meta_text}' if source.meta_field else ""
        template = '{"_id":%s' + head.replace("%", "%%") + ("," + fields if fields else "") + "}"
        return [(row[0], template % row) for row in zip(keys, *columns, strict=True)]

    @staticmethod
    def _finalize(
        acc: Accumulator,
        plan: C.AccumulatorPlan,
        state: Any,
        window: dict[str, Any],
        source: C.WindowSource,
    ) -> Any:
        result = fast_finalize(acc, state)
        if not plan.root_input:
            return result
        # A `$$ROOT` argument is the document as the window sees it, window included.
        if isinstance(result, list):
            return [with_window(v, source.meta_field, window) for v in result]
        return with_window(result, source.meta_field, window)


def fast_finalize(acc: Accumulator, state: Any) -> Any:
    """`acc.finalize(state)`, with a shortcut for double `$sum`/`$avg` results.

    The exact sum `int_sum + num / den` (see `accumulators.numeric._ExactSum`) rounds to the same double
    as `float(Fraction)` when divided as integers, without building Fractions; any other case
    (integers, infinities, NaN, decimals, overflow) goes to the accumulator.
    """
    if acc.op in ("$sum", "$avg") and state[7] == 2 and not (state[4] or state[5] or state[6]):
        count, total, num, den = state[0], state[1], state[2], state[3]
        if acc.op == "$avg":
            if count == 0:
                return None
            den *= count
            total_num = total * state[3] + num
        else:
            total_num = total * den + num
        try:
            return total_num / den
        except OverflowError:
            return acc.finalize(state)
    return acc.finalize(state)


def _first_order(group: list[Any]) -> int:
    return group[0]


def finalize_all(acc: Accumulator, states: list[Any]) -> list[Any]:
    """`fast_finalize` over many states (the `$sum`/`$avg` shortcut inlined, and `$push`'s
    order sort keyed by `itemgetter`: 3x faster than its lambda on 2M values)."""
    if acc.op == "$push" and type(acc) is Push:
        first = itemgetter(0)
        return [[value for _, value in sorted(state, key=first)] for state in states]
    if acc.op not in ("$sum", "$avg"):
        return [acc.finalize(state) for state in states]
    average = acc.op == "$avg"
    out = []
    for state in states:
        if state[7] != 2 or state[4] or state[5] or state[6] or (average and not state[0]):
            out.append(acc.finalize(state))
            continue
        den = state[3] * state[0] if average else state[3]
        try:
            out.append((state[1] * state[3] + state[2]) / den)
        except OverflowError:
            out.append(acc.finalize(state))
    return out


def encode_values(values: Sequence[Any]) -> list[str]:
    """`encode` of each value, with inline paths for the common scalars and number arrays."""
    out: list[str] = []
    append = out.append
    for value in values:
        kind = type(value)
        if kind is float and value - value == 0:  # finite
            text = repr(value)
            append(text if "e" in text else text + "e0")
        elif kind is str:
            append(_string(value))
        elif kind is int:
            append(str(value))
        elif kind is list:
            append(_list_text(value))
        else:
            append(encode(value))
    return out


def _list_text(values: list[Any]) -> str:
    """An array's text; arrays of finite doubles (`$push` of numbers) in one C-level join."""
    try:
        text = ",".join(map(float.__repr__, values))
    except TypeError:  # not all doubles
        return encode(values)
    if "e" in text or "n" in text:  # exponents, inf, nan: the general path adds the markers
        return encode(values)
    return "[" + text.replace(",", "e0,") + "e0]" if text else "[]"


def fold(
    runtime: GroupRuntime,
    groups: dict[Any, list[Any]],
    items: Iterable[tuple[int, Any, Any, Sequence[Sequence[Any]]]],
) -> None:
    """Fold `(order, norm_key, key_value, inputs)` items, in order, into `groups`."""
    for order, norm, key, inputs in items:
        group = groups.get(norm)
        if group is None:
            group = groups[norm] = runtime.new_group(order, key)
        runtime.add(group, inputs, order)


# --------------------------------------------------------------------------- buffered docs


def buffered_outputs(
    items: Sequence[tuple[int, str, str]],
    *,
    window: dict[str, Any] | None,
    source: C.WindowSource,
) -> list[Output]:
    """Documents buffered in a window as `(key, document)`; `window` is merged into their
    stream metadata when given (the document JSON does not hold it yet)."""
    out: list[Output] = []
    for _, ident, text in sorted(items, key=lambda item: item[0]):
        doc = decode_json(text)
        if window is not None:
            doc = with_window(doc, source.meta_field, window)
        out.append((ident, doc))
    return out


def sort_outputs(outputs: list[Output], keys: Sequence[tuple[str, int]]) -> list[Output]:
    """`$sort`: stable, so equal keys keep arrival order (arrays: min asc / max desc)."""
    result = list(outputs)
    for name, direction in reversed(keys):

        def key(item: Output, n: str = name, r: int = direction) -> tuple[Any, ...]:
            return sort_value_key(get_path(item[1], n), r)

        result.sort(key=key, reverse=direction < 0)
    return result


def run_later(
    outputs: list[Output],
    stages: Sequence[C.LaterStage],
    *,
    window: dict[str, Any],
    source: C.WindowSource,
) -> list[Output]:
    """The blocking stages after the first one (see `LaterStage`)."""
    for stage in stages:
        if stage.key == "$sort":
            outputs = sort_outputs(outputs, parse_sort_spec(dict(stage.body)))
        elif stage.key == "$limit":
            outputs = outputs[: int(stage.body)]
        elif stage.key == "$count":
            outputs = [("null", {stage.body: len(outputs)})] if outputs else []
        elif stage.key == "$group":
            outputs = _simple_group(outputs, stage.body, window=window, source=source)
        elif stage.key == "$match":
            outputs = [out for out in outputs if matches(stage.body, out[1])]
    return outputs


def simple_value(expr: Any, doc: Any, window: Mapping[str, Any]) -> Any:
    """Evaluate a field path, `$$ROOT`, `{$meta: "stream.window.*"}` or a constant."""
    if isinstance(expr, str) and expr.startswith("$$"):
        name, _, rest = expr[2:].partition(".")
        return get_path(doc, rest) if rest else doc
    if isinstance(expr, str) and expr.startswith("$"):
        return get_path(doc, expr[1:])
    if isinstance(expr, dict) and set(expr) == {"$meta"}:
        path = str(expr["$meta"]).split(".")[2:]
        value: Any = dict(window)
        for part in path:
            value = value.get(part, MISSING) if isinstance(value, dict) else MISSING
        return value
    if isinstance(expr, dict) and set(expr) == {"$literal"}:
        return expr["$literal"]
    return expr


def is_simple(expr: Any) -> bool:
    """Whether `simple_value` can evaluate `expr` (no operators besides `$meta`/`$literal`)."""
    if isinstance(expr, dict):
        if set(expr) in ({"$meta"}, {"$literal"}):
            return True
        return not any(k.startswith("$") for k in expr) and all(map(is_simple, expr.values()))
    if isinstance(expr, list):
        return all(map(is_simple, expr))
    return True


def _simple_group(
    outputs: list[Output],
    body: Mapping[str, Any],
    *,
    window: dict[str, Any],
    source: C.WindowSource,
) -> list[Output]:
    accs = [
        (name, op, arg) for name, spec in body.items() if name != "_id" for op, arg in spec.items()
    ]
    plan = C.GroupPlan(
        accumulators=tuple(C.AccumulatorPlan(name=n, op=op, spec=arg) for n, op, arg in accs)
    )
    runtime = GroupRuntime(plan)
    groups: dict[Any, list[Any]] = {}
    for order, (_, doc) in enumerate(outputs):
        key = simple_value(body.get("_id"), doc, window)
        key = None if key is MISSING else key
        inputs: list[list[Any]] = []
        for acc in runtime.accs:
            if acc.input_expr is MISSING:
                inputs.append([])
                continue
            values = [simple_value(acc.input_expr, doc, window)]
            for name, _ in getattr(acc, "sort_fields", ()):
                values.append(get_path(doc, name))
            inputs.append(values)
        fold(runtime, groups, [(order, sort_key(key), key, inputs)])
    return runtime.outputs(groups, window=window, source=source)
