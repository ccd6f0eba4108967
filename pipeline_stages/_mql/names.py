"""The names of MQL operators, without Spark: what the compilers implement and what they reject.

The compilers (`expressions`, `query.ops`, `query.compile`) dispatch on tables of Spark code;
this module holds the names alone so that `scan` can report unknown and unsupported operators
before Spark starts (tests/unit/mql/test_scan.py checks that the names match the tables).
"""

from __future__ import annotations

#: Expression operators Sluice implements (the keys of `expressions.OPS`).
EXPRESSION_OPERATORS = frozenset(
    {
        "$abs", "$acos", "$acosh", "$add", "$allElementsTrue", "$and", "$anyElementTrue",
        "$arrayElemAt", "$arrayToObject", "$asin", "$asinh", "$atan", "$atan2", "$atanh",
        "$avg", "$ceil", "$cmp", "$concat", "$concatArrays", "$cond", "$convert", "$cos",
        "$cosh", "$createUUID", "$currentDate", "$dateAdd", "$dateDiff", "$dateFromString",
        "$dateSubtract", "$dateToString", "$dateTrunc", "$dayOfMonth", "$dayOfWeek",
        "$dayOfYear", "$degreesToRadians", "$divide", "$eq", "$exp", "$filter", "$first",
        "$floor", "$getField", "$gt", "$gte", "$hour", "$ifNull", "$in", "$indexOfArray",
        "$indexOfCP", "$isArray", "$isNumber", "$isoDayOfWeek", "$isoWeek", "$isoWeekYear",
        "$last", "$let", "$literal", "$ln", "$log", "$log10", "$lt", "$lte", "$ltrim", "$map",
        "$max", "$mergeObjects", "$meta", "$millisecond", "$min", "$minute", "$mod", "$month",
        "$multiply", "$ne", "$not", "$objectToArray", "$or", "$pow", "$radiansToDegrees",
        "$range", "$reduce", "$regexMatch", "$replaceAll", "$replaceOne", "$reverseArray",
        "$round", "$rtrim", "$second", "$setField", "$sin", "$sinh", "$size", "$slice",
        "$split", "$sqrt", "$strLenBytes", "$strLenCP", "$strcasecmp", "$substr",
        "$substrBytes", "$substrCP", "$subtract", "$sum", "$switch", "$tan", "$tanh",
        "$toBool", "$toDate", "$toDecimal", "$toDouble", "$toInt", "$toLong", "$toLower",
        "$toObjectId", "$toString", "$toUpper", "$trim", "$trunc", "$type", "$unsetField",
        "$week", "$year",
    }
)  # fmt: skip

#: Documented MQL / Atlas expression operators that Sluice does not implement.
UNSUPPORTED_EXPRESSION_OPERATORS = frozenset(
    {
        "$function", "$accumulator", "$binarySize", "$bsonSize", "$bitAnd", "$bitNot",
        "$bitOr", "$bitXor", "$firstN", "$lastN", "$maxN", "$minN", "$median", "$percentile",
        "$rand", "$sampleRate", "$regexFind", "$regexFindAll", "$setDifference", "$setEquals",
        "$setIntersection", "$setIsSubset", "$setUnion", "$sortArray", "$stdDevPop",
        "$stdDevSamp", "$toHashedIndexKey", "$toUUID", "$tsIncrement", "$tsSecond", "$zip",
        "$dateToParts", "$dateFromParts", "$indexOfBytes", "$hash",
        "$serializeEJSON", "$deserializeEJSON", "$encStrStartsWith", "$encStrEndsWith",
        "$encStrContains", "$encStrNormalizedEq", "$toArray", "$toObject", "$subtype",
    }
)  # fmt: skip

#: Extended JSON type wrappers accepted as literals inside expressions.
EXPRESSION_EJSON_KEYS = frozenset(
    {"$date", "$oid", "$numberLong", "$numberDecimal", "$numberInt", "$numberDouble"}
)

#: Single-key objects that spell a BSON scalar in Extended JSON (query operands).
QUERY_EJSON_KEYS = frozenset(
    {
        "$date",
        "$oid",
        "$numberLong",
        "$numberInt",
        "$numberDouble",
        "$numberDecimal",
        "$regularExpression",
    }
)

#: Field-level query operators Sluice evaluates (the keys of `query.ops._HANDLERS`).
QUERY_FIELD_OPERATORS = frozenset(
    {
        "$all", "$elemMatch", "$eq", "$exists", "$gt", "$gte", "$in", "$lt", "$lte", "$mod",
        "$ne", "$nin", "$not", "$regex", "$size", "$type",
    }
)  # fmt: skip

#: Query operators Atlas or MongoDB knows that Sluice does not evaluate.
UNSUPPORTED_QUERY_OPERATORS = frozenset(
    {
        "$near", "$nearSphere", "$geoWithin", "$geoIntersects", "$within", "$maxDistance",
        "$minDistance", "$bitsAllSet", "$bitsAllClear", "$bitsAnySet", "$bitsAnyClear",
        "$text", "$where",
    }
)  # fmt: skip

#: Logical query operators (a non-empty array of filter documents).
LOGICAL = ("$and", "$or", "$nor")
#: Operators a filter document may hold at its top level.
TOP_LEVEL = (*LOGICAL, "$expr", "$jsonSchema", "$comment")
#: Keys that make an `$elemMatch` argument a sub-document query rather than operators.
DOCUMENT_LEVEL = frozenset({"$and", "$or", "$nor", "$expr", "$jsonSchema", "$where", "$text"})
