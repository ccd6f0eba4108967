"""`$group`: aggregate the documents of a window by `_id` (window inner pipeline only).

The body is `_id` (required; any expression, `null` for one group) plus output fields, each
`{<accumulator>: <argument>}`. Supported accumulators (atlas-semantics.md §3.6.4):

* unary, taking one expression: `$sum $avg $min $max $first $last $push $addToSet
  $stdDevPop $stdDevSamp $mergeObjects` (an array argument is refused: they are unary);
* `$count: {}` (no arguments);
* `$top`/`$bottom` `{sortBy, output}`; `$topN`/`$bottomN` `{n, sortBy, output}`;
* `$firstN $lastN $maxN $minN` `{input, n}`;
* `$percentile {input, p: [..], method: "approximate"}`, `$median {input, method: "approximate"}`.

Any other name is `unknown_operator` with a "did you mean" hint; `$accumulator` (server-side
JavaScript) is `unsupported_option`. Output field names must not be empty, start with `$` or
contain `.`. Expressions stay raw JSON for the expression compiler.
"""

from __future__ import annotations

import difflib
from typing import Any, Literal

from pydantic import Field, field_validator

from pipeline_stages._base import (
    BodySpec,
    ProblemCode,
    StageModel,
    custom_error,
    describe,
    field_name_problem,
)
from pipeline_stages._problems import ErrorList
from pipeline_stages.sort import sort_keys_errors

KEY = "$group"
OPERATOR_NAME = "GroupOperator"

UNARY_ACCUMULATORS = frozenset(
    {"$sum", "$avg", "$min", "$max", "$first", "$last", "$push", "$addToSet",
     "$stdDevPop", "$stdDevSamp", "$mergeObjects"}
)  # fmt: skip
UNSUPPORTED_ACCUMULATORS = {"$accumulator": "custom JavaScript accumulators are not available"}


def _n_value(value: Any) -> Any:
    # `n` may be an expression; a literal must be a positive whole number.
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not float(value).is_integer() or value < 1:
            raise custom_error(
                ProblemCode.INVALID_VALUE, f"n must be a positive integer, got {describe(value)}"
            )
        return int(value)
    if isinstance(value, dict) or (isinstance(value, str) and value.startswith("$")):
        return value
    raise custom_error(
        ProblemCode.INVALID_VALUE,
        f"n must be a positive integer or an expression, got {describe(value)}",
    )


class TopArgs(StageModel):
    """Arguments of `$top` / `$bottom`."""

    sort_by: dict[str, int] = Field(alias="sortBy")
    output: Any

    @field_validator("sort_by", mode="before")
    @classmethod
    def _sort_keys(cls, value: Any) -> Any:
        errors = ErrorList()
        keys = sort_keys_errors(value, errors, what="sortBy")
        errors.raise_if_any(cls.__name__)
        return keys


class TopNArgs(TopArgs):
    """Arguments of `$topN` / `$bottomN`."""

    n: Any

    _check_n = field_validator("n")(_n_value)


class NArgs(StageModel):
    """Arguments of `$firstN $lastN $maxN $minN`."""

    input: Any
    n: Any

    _check_n = field_validator("n")(_n_value)


class MedianArgs(StageModel):
    """Arguments of `$median`."""

    input: Any
    method: Literal["approximate"]


class PercentileArgs(MedianArgs):
    """Arguments of `$percentile`; a literal `p` is a non-empty array of numbers in [0, 1]."""

    p: Any

    @field_validator("p")
    @classmethod
    def _probabilities(cls, value: Any) -> Any:
        if isinstance(value, list):
            errors = ErrorList()
            if not value:
                errors.add(
                    (),
                    "too_short",
                    "p must be a non-empty array of numbers in [0, 1], got []",
                    value,
                )
            for index, item in enumerate(value):
                if (
                    isinstance(item, bool)
                    or not isinstance(item, int | float)
                    or not 0 <= item <= 1
                ):
                    errors.add(
                        (index,),
                        ProblemCode.INVALID_VALUE,
                        f"p values must be numbers in [0, 1], got {describe(item)}",
                        item,
                    )
            errors.raise_if_any(cls.__name__)
        elif not isinstance(value, dict | str):
            raise custom_error(
                ProblemCode.INVALID_VALUE,
                f"p must be an array of numbers in [0, 1] or an expression, got {describe(value)}",
            )
        return value


ArgumentModel = TopNArgs | TopArgs | NArgs | PercentileArgs | MedianArgs

ARGUMENT_MODELS: dict[str, type[ArgumentModel]] = {
    "$top": TopArgs, "$bottom": TopArgs, "$topN": TopNArgs, "$bottomN": TopNArgs,
    "$firstN": NArgs, "$lastN": NArgs, "$maxN": NArgs, "$minN": NArgs,
    "$median": MedianArgs, "$percentile": PercentileArgs,
}  # fmt: skip
ACCUMULATORS = frozenset(UNARY_ACCUMULATORS | ARGUMENT_MODELS.keys() | {"$count"})


class Accumulator(StageModel):
    """One output field of `$group`: the accumulator name, its raw argument, parsed arguments.

    `arguments` is set for the accumulators that take named arguments (`$topN`, ...) and is
    None for unary ones and `$count`.
    """

    operator: str
    argument: Any
    arguments: ArgumentModel | None = None


def _accumulator(name: str, raw: Any, errors: ErrorList) -> Accumulator | None:
    loc = (name,)
    if not isinstance(raw, dict) or len(raw) != 1:
        errors.add(
            loc,
            ProblemCode.INVALID_VALUE,
            f"The field '{name}' must be an accumulator object {{<$operator>: <argument>}}, got {describe(raw)}",
            raw,
        )
        return None
    operator, argument = next(iter(raw.items()))
    if operator in UNSUPPORTED_ACCUMULATORS:
        errors.add(
            (*loc, operator),
            ProblemCode.UNSUPPORTED_OPTION,
            f"{operator} is not supported: {UNSUPPORTED_ACCUMULATORS[operator]}",
            argument,
        )
        return None
    if operator not in ACCUMULATORS:
        hint = difflib.get_close_matches(operator, sorted(ACCUMULATORS), n=1)
        suffix = f"; did you mean '{hint[0]}'?" if hint else ""
        errors.add(
            (*loc, operator),
            ProblemCode.UNKNOWN_OPERATOR,
            f"Unknown group accumulator '{operator}'{suffix}",
            raw,
        )
        return None
    return _with_arguments(name, operator, argument, errors)


def _with_arguments(
    name: str, operator: str, argument: Any, errors: ErrorList
) -> Accumulator | None:
    loc = (name, operator)
    if operator == "$count":
        if argument != {}:
            errors.add(
                loc,
                ProblemCode.INVALID_ARGUMENTS,
                f"$count takes no arguments, i.e. $count: {{}}, got {describe(argument)}",
                argument,
            )
            return None
        return Accumulator(operator=operator, argument=argument)
    if operator in UNARY_ACCUMULATORS:
        if isinstance(argument, list):
            errors.add(
                loc,
                ProblemCode.INVALID_ARGUMENTS,
                f"The {operator} accumulator is a unary operator, got an array",
                argument,
            )
            return None
        return Accumulator(operator=operator, argument=argument)
    model = ARGUMENT_MODELS[operator]
    if not isinstance(argument, dict):
        errors.add(
            loc,
            ProblemCode.INVALID_ARGUMENTS,
            f"{operator} takes an object of named arguments ({', '.join(_aliases(model))}), got {describe(argument)}",
            argument,
        )
        return None
    parsed = errors.check(
        lambda v: model.model_validate(v, by_alias=True, by_name=False), argument, *loc
    )
    return (
        None
        if parsed is None
        else Accumulator(operator=operator, argument=argument, arguments=parsed)
    )


def _aliases(model: type[StageModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


class GroupSpec(BodySpec):
    """The body of `$group`: the `_id` expression and the output accumulators, in order."""

    id: Any = Field(alias="_id")
    accumulators: dict[str, Accumulator]

    @classmethod
    def _fields_from_body(cls, raw: Any) -> dict[str, Any]:
        errors = ErrorList()
        if not isinstance(raw, dict):
            raise custom_error(
                "dict_type",
                f"$group takes an object with _id and accumulators, got {describe(raw)}",
            )
        if "_id" not in raw:
            errors.add(("_id",), "missing", "a group specification must include an _id", raw)
        accumulators: dict[str, Accumulator] = {}
        for name, value in raw.items():
            if name == "_id":
                continue
            if problem := field_name_problem(name, dotted=False):
                errors.add((name,), ProblemCode.INVALID_VALUE, problem, name)
            elif accumulator := _accumulator(name, value, errors):
                accumulators[name] = accumulator
        errors.raise_if_any(cls.__name__)
        return {"_id": raw["_id"], "accumulators": accumulators}
