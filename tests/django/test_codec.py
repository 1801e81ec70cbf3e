"""Payload encoding: job arguments to JSON text and back, and the errors that name what went wrong."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
import os
import re
import sys
import threading
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backwave_django.codec import MAX_DEPTH, MAX_INT_DIGITS, PayloadDecodeError, PayloadError, decode, encode

UTC = dt.UTC
IST = dt.timezone(dt.timedelta(hours=5, minutes=30))

ROUND_TRIPS = [
    pytest.param(None, id="none"),
    pytest.param(True, id="bool"),
    pytest.param(-42, id="int"),
    pytest.param(2.5, id="float"),
    pytest.param("héllo ✓", id="unicode string"),
    pytest.param(dt.date(2026, 2, 28), id="date"),
    pytest.param(dt.datetime(2026, 1, 1, 12, 30, 15, 123456, tzinfo=UTC), id="aware datetime, UTC"),
    pytest.param(dt.datetime(2026, 7, 1, 9, 0, tzinfo=IST), id="aware datetime, +05:30"),
    pytest.param(dt.time(23, 59, 58, 999), id="time"),
    pytest.param(dt.timedelta(days=3, seconds=7, microseconds=5), id="timedelta"),
    pytest.param(dt.timedelta(days=-1, seconds=86399), id="negative timedelta"),
    pytest.param(uuid.UUID("12345678-1234-5678-1234-567812345678"), id="uuid"),
    pytest.param(decimal.Decimal("1.10"), id="decimal keeps its exponent"),
    pytest.param(decimal.Decimal("-1E+30"), id="large decimal"),
    pytest.param((1, "two", 3.0), id="tuple"),
    pytest.param((), id="empty tuple"),
    pytest.param({3, 1, 2}, id="set"),
    pytest.param(frozenset({"a", "b"}), id="frozenset"),
    pytest.param([1, [2, [3, []]]], id="nested lists"),
    pytest.param({"a": {"b": {"c": []}}, "": {}}, id="nested dicts"),
    pytest.param(
        {
            "when": [dt.date(2026, 1, 1), (dt.time(8), {uuid.UUID(int=7)})],
            "amounts": {"net": decimal.Decimal("9.99"), "tags": ("x", ("y",))},
        },
        id="tagged values nested in lists and dicts",
    ),
]


@pytest.mark.parametrize("value", ROUND_TRIPS)
def test_a_value_comes_back_equal_and_of_the_same_type(value):
    back = decode(encode({"value": value}))["value"]
    assert back == value
    assert type(back) is type(value)


def test_nested_values_keep_their_types():
    back = decode(encode({"v": [(dt.datetime(2026, 1, 1, tzinfo=UTC), {decimal.Decimal("1")})]}))["v"]
    stamp, amounts = back[0]
    assert (type(stamp), type(amounts), type(next(iter(amounts)))) == (dt.datetime, set, decimal.Decimal)


def test_an_aware_datetime_keeps_its_offset():
    back = decode(encode({"at": dt.datetime(2026, 7, 1, 9, 0, tzinfo=IST)}))["at"]
    assert back.utcoffset() == dt.timedelta(hours=5, minutes=30)


def test_a_datetime_is_not_mistaken_for_a_date():
    assert json.loads(encode({"at": dt.datetime(2026, 1, 1, tzinfo=UTC)}))["at"]["$bw"] == "datetime"


def test_several_arguments_round_trip_together():
    arguments = {"user_id": 7, "since": dt.date(2026, 1, 1), "dry_run": False}
    assert decode(encode(arguments)) == arguments


def test_no_arguments_encode_to_an_empty_object():
    assert encode({}) == "{}"
    assert decode("{}") == {}


def test_a_set_encodes_the_same_whatever_its_insertion_order():
    assert encode({"s": {3, 1, 2}}) == encode({"s": {2, 3, 1}})


def test_plain_json_stays_plain_and_compact():
    assert encode({"a": [1, "é"], "b": None}) == '{"a":[1,"é"],"b":null}'


# -- what cannot be stored -----------------------------------------------------------------------------------


def test_an_arbitrary_object_is_refused_naming_the_argument():
    with pytest.raises(PayloadError, match=r"argument 'thing' is a builtins\.object") as caught:
        encode({"thing": object()})
    assert "pass its primary key" in str(caught.value)


def test_a_file_object_is_refused_naming_the_argument():
    with (
        open(os.devnull) as handle,
        pytest.raises(PayloadError, match=r"argument 'report' is a _io\.TextIOWrapper"),
    ):
        encode({"report": handle})


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")], ids=repr)
def test_a_float_json_cannot_represent_is_refused(number):
    with pytest.raises(PayloadError, match=rf"argument 'ratio' is {number!r}, which JSON cannot represent"):
        encode({"ratio": number})


def test_a_non_string_dict_key_is_refused():
    with pytest.raises(PayloadError, match="argument 'counts' has a key 1 that is not a string"):
        encode({"counts": {1: "one"}})


def test_the_reserved_key_is_refused():
    with pytest.raises(PayloadError, match=r"argument 'options' uses the reserved key '\$bw'"):
        encode({"options": {"$bw": "datetime", "v": "2026-01-01"}})


def test_the_error_points_inside_nested_values():
    with pytest.raises(PayloadError, match=r"argument 'rows'\[1\]\['owner'\] is a builtins\.object"):
        encode({"rows": [{"owner": 1}, {"owner": object()}]})
    with pytest.raises(PayloadError, match=r"argument 'pair'\[0\] is nan"):
        encode({"pair": (float("nan"), 1)})


def test_a_payload_error_is_a_type_error():
    assert issubclass(PayloadError, TypeError)


def test_a_set_subclass_decodes_as_a_set():
    class Tags(set):
        pass

    back = decode(encode({"tags": Tags({"a", "b"})}))["tags"]
    assert (type(back), back) == (set, {"a", "b"})


def test_a_key_whose_repr_raises_is_refused_all_the_same():
    class Key:
        def __repr__(self):
            raise RuntimeError("repr")

        def __hash__(self):
            return 1

    with pytest.raises(PayloadError, match="has a key <Key> that is not a string"):
        encode({"d": {Key(): 1}})


def test_an_argument_name_that_is_not_a_string_is_refused():
    with pytest.raises(PayloadError, match="argument name 1 is not a string"):
        encode({1: "x"})


# -- the bounds of what can be stored ------------------------------------------------------------------------


def nested(depth, make=lambda inner: [inner], leaf=0):
    value = leaf
    for _ in range(depth):
        value = make(value)
    return value


@pytest.mark.parametrize("sign", [1, -1], ids=["positive", "negative"])
def test_an_integer_of_the_most_digits_round_trips(sign):
    number = sign * (10**MAX_INT_DIGITS - 1)
    assert decode(encode({"n": number})) == {"n": number}


@pytest.mark.parametrize("sign", [1, -1], ids=["positive", "negative"])
def test_an_integer_of_more_digits_is_refused_naming_where_it_is(sign):
    with pytest.raises(
        PayloadError, match=r"argument 'rows'\[1\]\['id'\] is an integer of more than 4000 digits"
    ):
        encode({"rows": [{}, {"id": sign * 10**MAX_INT_DIGITS}]})


def test_the_integer_bound_follows_a_lower_limit_set_in_this_process():
    previous = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(1000)
    try:
        assert encode({"n": 10**999})
        with pytest.raises(PayloadError, match="is an integer of more than 1000 digits"):
            encode({"n": 10**1000})
    finally:
        sys.set_int_max_str_digits(previous)


MAKERS = [
    pytest.param(lambda inner: [inner], id="lists"),
    pytest.param(lambda inner: {"k": inner}, id="dicts"),
    pytest.param(lambda inner: (inner,), id="tuples"),
    pytest.param(lambda inner: frozenset([inner]), id="frozensets"),
]


@pytest.mark.parametrize("make", MAKERS)
def test_nesting_to_the_maximum_depth_round_trips(make):
    deepest = nested(MAX_DEPTH, make, leaf=dt.datetime(2026, 1, 1, tzinfo=UTC))
    assert decode(encode({"deep": deepest})) == {"deep": deepest}


@pytest.mark.parametrize("make", MAKERS)
def test_nesting_deeper_than_the_maximum_is_refused(make):
    with pytest.raises(PayloadError, match=rf"is nested deeper than {MAX_DEPTH} containers"):
        encode({"deep": nested(MAX_DEPTH + 1, make)})


def test_the_depth_error_names_the_container_too_deep():
    with pytest.raises(PayloadError) as caught:
        encode({"deep": nested(MAX_DEPTH + 1)})
    assert str(caught.value).startswith(
        "argument 'deep'[0][0][0][0][0][0][0][0][... 88 more ...][0][0][0][0] is"
    )


def test_a_hundred_thousand_levels_are_refused_without_a_recursion_error():
    with pytest.raises(PayloadError, match="nested deeper than"):
        encode({"deep": nested(100_000)})


def test_a_list_that_contains_itself_is_refused():
    looped = [1]
    looped.append(looped)
    with pytest.raises(PayloadError, match="or contains itself"):
        encode({"looped": looped})


@pytest.mark.parametrize(
    ("value", "where"),
    [
        pytest.param("ab\ud800", "argument 'name' is a string", id="a string"),
        pytest.param(["ok", "\udcff"], r"argument 'name'\[1\] is a string", id="a nested string"),
        pytest.param({"\udc80key": 1}, "argument 'name' has a key", id="a key"),
        pytest.param(("\ud83d",), r"argument 'name'\[0\] is a string", id="half of a surrogate pair"),
    ],
)
def test_a_lone_surrogate_is_refused_because_no_database_can_store_it(value, where):
    with pytest.raises(
        PayloadError, match=rf"{where} that holds a lone surrogate \(U\+D[89A-F][0-9A-F]{{2}}"
    ):
        encode({"name": value})


def test_a_lone_surrogate_in_an_argument_name_is_refused():
    with pytest.raises(PayloadError, match="holds a lone surrogate"):
        encode({"\ud800": 1})


def test_a_surrogate_error_says_how_to_fix_it():
    with pytest.raises(PayloadError, match="errors='replace'"):
        encode({"path": b"caf\xe9".decode("utf-8", "surrogateescape")})


def test_nul_characters_round_trip_and_are_escaped():
    value = {"a\x00b": "\x00", "list": ["x\x00y"]}
    text = encode({"v": value})
    assert "\x00" not in text
    assert decode(text) == {"v": value}


@pytest.mark.parametrize("number", ["NaN", "-NaN", "sNaN", "NaN123"])
def test_a_decimal_nan_is_refused(number):
    with pytest.raises(
        PayloadError, match=r"argument 'price' is Decimal\('-?s?NaN\d*'\), which never equals itself"
    ):
        encode({"price": decimal.Decimal(number)})


@pytest.mark.parametrize("number", ["Infinity", "-Infinity", "-0", "1E+999999", "-1.000E-999999"])
def test_a_decimal_infinity_or_extreme_exponent_round_trips(number):
    value = decimal.Decimal(number)
    back = decode(encode({"price": value}))["price"]
    assert (back, str(back)) == (value, str(value))


@pytest.mark.parametrize(
    "offset",
    [dt.timedelta(microseconds=1), -dt.timedelta(microseconds=999_999)],
    ids=["+00:00:00.000001", "-00:00:00.999999"],
)
@pytest.mark.parametrize("kind", ["datetime", "time"])
def test_an_offset_of_less_than_a_second_is_refused_because_python_reads_it_back_as_utc(kind, offset):
    zone = dt.timezone(offset)
    value = dt.datetime(2026, 1, 1, tzinfo=zone) if kind == "datetime" else dt.time(12, tzinfo=zone)
    with pytest.raises(PayloadError, match="argument 'at' has a UTC offset of less than a second"):
        encode({"at": value})


@pytest.mark.parametrize(
    "offset",
    [
        dt.timedelta(seconds=30),
        dt.timedelta(hours=1, microseconds=5),
        -dt.timedelta(minutes=1, microseconds=5),
    ],
    ids=["+00:00:30", "+01:00:00.000005", "-00:01:00.000005"],
)
def test_an_offset_with_seconds_or_a_fraction_of_them_round_trips(offset):
    value = dt.datetime(2026, 1, 1, 8, tzinfo=dt.timezone(offset))
    back = decode(encode({"at": value}))["at"]
    assert (back, back.utcoffset()) == (value, offset)


# -- what no longer decodes ----------------------------------------------------------------------------------

UNDECODABLE = [
    pytest.param("{not json", "payload is not valid JSON: Expecting property name", id="invalid JSON"),
    pytest.param("", "payload is not valid JSON", id="empty text"),
    pytest.param("[1, 2]", "payload is an array, not an object of arguments", id="a list"),
    pytest.param('"text"', "payload is a string, not an object of arguments", id="a string"),
    pytest.param("null", "payload is null, not an object of arguments", id="null"),
    pytest.param(
        '{"$bw": "tuple", "v": []}', "payload is a tagged tuple, not an object", id="a tagged payload"
    ),
    pytest.param(
        '{"x": {"$bw": "pickle", "v": "..."}}',
        "argument 'x' has an unknown payload tag 'pickle'",
        id="unknown tag",
    ),
    pytest.param(
        '{"x": {"$bw": 5, "v": 1}}', "unknown payload tag that is a number", id="a number as the tag"
    ),
    pytest.param(
        '{"x": {"$bw": ["date"], "v": 1}}', "unknown payload tag that is an array", id="a list as the tag"
    ),
    pytest.param(
        '{"x": {"$bw": {}, "v": 1}}', "unknown payload tag that is an object", id="an object as the tag"
    ),
    pytest.param(
        '{"x": {"$bw": true, "v": 1}}', "unknown payload tag that is a boolean", id="a bool as the tag"
    ),
    pytest.param(
        '{"x": {"$bw": null, "v": 1}}', "argument 'x' has an unknown payload tag that is null", id="null tag"
    ),
    pytest.param(
        '{"x": {"$bw": "pickle", "w": 1}}', "unknown payload tag 'pickle'", id="unknown tag and wrong keys"
    ),
    pytest.param(
        '{"x": {"$bw": "date", "v": "2026-01-01", "w": 1}}',
        "argument 'x' is a tagged date value with keys '$bw', 'v', 'w'; expected exactly '$bw' and 'v'",
        id="a tag with extra keys",
    ),
    pytest.param(
        '{"x": {"$bw": "date"}}',
        "argument 'x' is a tagged date value with keys '$bw'; expected exactly '$bw' and 'v'",
        id="a tag without a value",
    ),
    pytest.param(
        '{"x": {"$bw": "uuid", "value": "x"}}',
        "argument 'x' is a tagged uuid value with keys '$bw', 'value'; expected exactly '$bw' and 'v'",
        id="a tag with a misspelt value key",
    ),
    pytest.param(
        '{"x": [{"$bw": "tuple", "v": [1], "extra": {"$bw": "date", "v": "2026-01-01"}}]}',
        "argument 'x'[0] is a tagged tuple value with keys '$bw', 'extra', 'v'; "
        "expected exactly '$bw' and 'v'",
        id="a nested tag with extra keys",
    ),
    pytest.param(
        '{"x": {"$bw": "date", "v": "yesterday"}}',
        "argument 'x' is a tagged date whose text is not an ISO 8601 date",
        id="bad date",
    ),
    pytest.param(
        '{"x": {"$bw": "date", "v": "10000-01-01"}}',
        "argument 'x' is a tagged date whose text is not an ISO 8601 date",
        id="a year past 9999",
    ),
    pytest.param(
        '{"x": {"$bw": "datetime", "v": 5}}',
        "argument 'x' is a tagged datetime whose 'v' is a number; expected ISO 8601 text",
        id="datetime from a number",
    ),
    pytest.param('{"x": {"$bw": "time", "v": "25:00"}}', "is a tagged time whose text is not", id="bad time"),
    pytest.param(
        '{"x": {"$bw": "timedelta", "v": [1]}}',
        "argument 'x' is a tagged timedelta that is not [days, seconds, microseconds] in integers",
        id="short timedelta",
    ),
    pytest.param(
        '{"x": {"$bw": "timedelta", "v": [1, 2, 3, 4]}}',
        "is a tagged timedelta that is not [days, seconds, microseconds]",
        id="long timedelta",
    ),
    pytest.param(
        '{"x": {"$bw": "timedelta", "v": [1.5, 0, 0]}}',
        "is a tagged timedelta that is not [days, seconds, microseconds] in integers",
        id="timedelta of floats",
    ),
    pytest.param(
        '{"x": {"$bw": "timedelta", "v": {"0": 1}}}',
        "argument 'x' is a tagged timedelta whose 'v' is an object; expected [days, seconds, microseconds]",
        id="timedelta from an object",
    ),
    pytest.param(
        '{"x": {"$bw": "timedelta", "v": "x"}}',
        "is a tagged timedelta whose 'v' is a string",
        id="timedelta from text",
    ),
    pytest.param(
        '{"x": {"$bw": "timedelta", "v": [1000000000, 0, 0]}}',
        "argument 'x' is a tagged timedelta out of range (at most 999999999 days)",
        id="timedelta overflow",
    ),
    pytest.param(
        '{"x": {"$bw": "uuid", "v": "not-a-uuid"}}',
        "argument 'x' is a tagged uuid whose text is not a UUID",
        id="bad uuid",
    ),
    pytest.param(
        '{"x": {"$bw": "decimal", "v": "abc"}}',
        "is a tagged decimal whose text is not a number",
        id="bad decimal",
    ),
    pytest.param(
        '{"x": {"$bw": "decimal", "v": "1E+9999999999999999999999"}}',
        "is a tagged decimal whose text is not a number a Decimal can hold",
        id="decimal exponent out of range",
    ),
    pytest.param(
        '{"x": {"$bw": "decimal", "v": 1.5}}', "is a tagged decimal whose 'v' is a number", id="float decimal"
    ),
    pytest.param(
        '{"x": {"$bw": "decimal", "v": "sNaN"}}', "is a tagged decimal that is NaN", id="decimal NaN"
    ),
    pytest.param(
        '{"x": {"$bw": "tuple", "v": 5}}',
        "argument 'x' is a tagged tuple whose 'v' is a number; expected an array",
        id="tuple from a number",
    ),
    pytest.param(
        '{"x": {"$bw": "tuple", "v": "abc"}}', "is a tagged tuple whose 'v' is a string", id="tuple from text"
    ),
    pytest.param(
        '{"x": {"$bw": "set", "v": [[1]]}}',
        "argument 'x' is a tagged set holding an item that cannot be in a set",
        id="set of unhashable items",
    ),
    pytest.param(
        '{"x": {"$bw": "frozenset", "v": [{"a": 1}]}}',
        "is a tagged frozenset holding an item that cannot be in a frozenset",
        id="frozenset of objects",
    ),
    pytest.param(
        '{"x": {"$bw": "date", "v": {"$bw": "date", "v": "2026-01-01"}}}',
        "is a tagged date whose 'v' is a tagged date; expected ISO 8601 text",
        id="a tag inside a tag",
    ),
    pytest.param(
        '[{"$bw": "nope", "v": 1}]',
        "payload[0] has an unknown payload tag 'nope'",
        id="a bad tag in a top list",
    ),
    pytest.param(
        '{"rows": [1, {"when": [{"$bw": "date", "v": "x"}]}]}',
        "argument 'rows'[1]['when'][0] is a tagged date whose text is not an ISO 8601 date",
        id="the path to a nested tag",
    ),
    pytest.param(
        '{"a": {"$bw": "date", "v": "x"}, "b": [}',
        "payload is not valid JSON: Expecting value",
        id="a bad tag before broken JSON",
    ),
]


@pytest.mark.parametrize(("text", "message"), UNDECODABLE)
def test_a_payload_that_no_longer_decodes_raises_a_decode_error(text, message):
    with pytest.raises(PayloadDecodeError, match=re.escape(message)):
        decode(text)


@pytest.mark.parametrize("tag", ['["date"]', "{}", "5", "1.5", "false"])
def test_a_tag_that_is_not_a_string_is_a_decode_error_not_a_type_error(tag):
    with pytest.raises(PayloadDecodeError, match="unknown payload tag") as caught:
        decode(f'{{"x": {{"$bw": {tag}, "v": 1}}}}')
    assert not isinstance(caught.value, TypeError)


def test_a_payload_decode_error_is_a_value_error():
    assert issubclass(PayloadDecodeError, ValueError)


# -- what used to halt a worker ------------------------------------------------------------------------------


def test_nesting_a_hundred_thousand_deep_is_a_decode_error():
    with pytest.raises(PayloadDecodeError, match="payload nests too deeply to read"):
        decode('{"deep": ' + "[" * 100_000 + "]" * 100_000 + "}")


def test_nesting_too_deep_is_a_decode_error_in_a_worker_thread_too():
    errors = []

    def read():
        try:
            decode('{"deep": ' + '{"a":' * 100_000 + "1" + "}" * 100_001)
        except Exception as exc:
            errors.append(exc)

    worker = threading.Thread(target=read)
    worker.start()
    worker.join()
    assert [type(exc) for exc in errors] == [PayloadDecodeError]


def test_an_integer_this_process_cannot_read_is_a_decode_error_naming_where_it_is():
    digits = sys.get_int_max_str_digits() + 1
    with pytest.raises(PayloadDecodeError) as caught:
        decode('{"rows": [0, {"id": -' + "7" * digits + "}]}")
    assert str(caught.value) == (
        f"argument 'rows'[1]['id'] is an integer of {digits} digits, more than this process reads from text "
        f"({digits - 1}; see sys.set_int_max_str_digits)"
    )


def test_text_that_is_not_a_string_is_a_decode_error():
    with pytest.raises(PayloadDecodeError, match=r"payload does not decode \(TypeError\)"):
        decode(None)


def test_a_long_argument_name_is_cut_in_the_message():
    with pytest.raises(PayloadDecodeError) as caught:
        decode('{"' + "k" * 10_000 + '": {"$bw": "date", "v": "x"}}')
    assert len(str(caught.value)) < 200


# The value is someone's data: staff who may only view jobs see the cause, so it must never be quoted.
SECRET = "hunter2-SECRET"
CARRYING_A_SECRET = [
    '{"x": {"$bw": "date", "v": "%s"}}',
    '{"x": {"$bw": "datetime", "v": "2026-01-01T%s"}}',
    '{"x": {"$bw": "time", "v": "%s"}}',
    '{"x": {"$bw": "uuid", "v": "%s"}}',
    '{"x": {"$bw": "decimal", "v": "%s"}}',
    '{"x": {"$bw": "timedelta", "v": ["%s", 0, 0]}}',
    '{"x": {"$bw": "tuple", "v": "%s"}}',
    '{"x": {"$bw": "set", "v": [["%s"]]}}',
    '{"x": {"$bw": "date", "v": ["%s"]}}',
    '{"x": {"$bw": "date", "v": "2026-01-01", "w": "%s"}}',
    '{"x": ["%s", {"$bw": "uuid", "v": "%s"}]}',
]


@pytest.mark.parametrize("template", CARRYING_A_SECRET)
def test_a_decode_error_never_quotes_the_value(template):
    with pytest.raises(PayloadDecodeError) as caught:
        decode(template.replace("%s", SECRET))
    assert SECRET not in str(caught.value)
    assert "hunter2" not in str(caught.value)


# -- properties ----------------------------------------------------------------------------------------------
# For any value: it round-trips exactly, or encode refuses it with PayloadError, and for the reasons the
# bounds give (never another exception). For any text: decode returns arguments or raises PayloadDecodeError.

PROPERTY = settings(max_examples=200, deadline=None)

any_text = st.text(st.characters(codec=None, categories=None))  # lone surrogates and NUL included
# Around our bound (4000 digits) and around Python's default limit for reading ints from text (4300).
near_the_bound = st.sampled_from(
    [MAX_INT_DIGITS - 1, MAX_INT_DIGITS, MAX_INT_DIGITS + 1, 4300, 4301]
).flatmap(lambda digits: st.sampled_from([10**digits - 1, 10**digits, -(10**digits) + 1, -(10**digits)]))
odd_decimals = st.sampled_from(
    [decimal.Decimal(text) for text in ["sNaN", "-NaN7", "-0", "1E+999999", "-Infinity", "1.10"]]
)
day = dt.timedelta(days=1) - dt.timedelta(microseconds=1)
offsets = st.none() | st.just(UTC) | st.timedeltas(min_value=-day, max_value=day).map(dt.timezone)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers() | near_the_bound,
    st.floats(),
    any_text,
    st.decimals(allow_nan=True, allow_infinity=True) | odd_decimals,
    st.dates(),
    st.times(timezones=offsets),
    st.datetimes(timezones=offsets),
    st.timedeltas(),
    st.uuids(),
)
hashables = st.recursive(
    scalars.filter(lambda v: not (isinstance(v, decimal.Decimal) and v.is_snan())),  # sNaN cannot be hashed
    lambda inner: st.lists(inner, max_size=3).map(tuple) | st.frozensets(inner, max_size=3),
    max_leaves=8,
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(any_text, inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.sets(hashables, max_size=4),
        st.frozensets(hashables, max_size=4),
    ),
    max_leaves=20,
)


def canonical(value):
    """A form that tells apart what == does not: -0.0 from 0.0, Decimal 1.10 from 1.1, +01:00 from UTC."""
    if isinstance(value, dict):
        return ("dict", [(key, canonical(item)) for key, item in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [canonical(item) for item in value])
    if isinstance(value, set | frozenset):
        return (type(value).__name__, sorted(repr(canonical(item)) for item in value))
    if isinstance(value, dt.date | dt.time):
        return (type(value).__name__, value.isoformat())
    return (type(value).__name__, repr(value))


def has_surrogate(text):
    return any(0xD800 <= ord(char) <= 0xDFFF for char in text)


def should_be_refused(value, depth=0):
    """The bounds, written out plainly: what encode must refuse."""
    if isinstance(value, str):
        return has_surrogate(value)
    if isinstance(value, float):
        return value != value or value in (float("inf"), float("-inf"))
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) >= 10**MAX_INT_DIGITS
    if isinstance(value, decimal.Decimal):
        return value.is_nan()
    if isinstance(value, dt.datetime | dt.time) and value.utcoffset() is not None:
        return dt.timedelta(0) < abs(value.utcoffset()) < dt.timedelta(seconds=1)
    if isinstance(value, dict):
        keys = any(has_surrogate(key) for key in value)
        return depth >= MAX_DEPTH or keys or any(should_be_refused(v, depth + 1) for v in value.values())
    if isinstance(value, list | tuple | set | frozenset):
        return depth >= MAX_DEPTH or any(should_be_refused(item, depth + 1) for item in value)
    return False


def assert_storable(text):
    assert "\x00" not in text  # PostgreSQL text cannot hold NUL
    text.encode("utf-8")  # no lone surrogate: valid UTF-8 for any database


@PROPERTY
@given(value=values)
def test_any_value_round_trips_exactly_or_is_refused_for_a_stated_bound(value):
    try:
        text = encode({"value": value})
    except PayloadError:
        assert should_be_refused(value)
        return
    assert not should_be_refused(value)
    assert_storable(text)
    assert canonical(decode(text)["value"]) == canonical(value)


@settings(max_examples=50, deadline=None)
@given(kinds=st.lists(st.sampled_from([list, dict, tuple]), min_size=MAX_DEPTH - 2, max_size=MAX_DEPTH + 2))
def test_any_mix_of_containers_round_trips_up_to_the_maximum_depth(kinds):
    value = dt.datetime(2026, 1, 1, tzinfo=IST)
    for kind in kinds:
        value = {"k": value} if kind is dict else kind([value])
    if len(kinds) > MAX_DEPTH:
        with pytest.raises(PayloadError, match="is nested deeper than"):
            encode({"value": value})
    else:
        assert decode(encode({"value": value})) == {"value": value}


@PROPERTY
@given(text=any_text)
def test_any_text_decodes_or_raises_a_decode_error(text):
    with contextlib.suppress(PayloadDecodeError):
        assert isinstance(decode(text), dict)


json_scalars = st.none() | st.booleans() | st.integers() | near_the_bound | st.floats() | any_text
tags = st.sampled_from(
    ["datetime", "date", "time", "timedelta", "uuid", "decimal", "tuple", "set", "frozenset"]
)


# What a tagged value's 'v' could be: anything, or close to what a decoder expects.
near_tag_values = st.one_of(
    st.lists(st.integers(), min_size=2, max_size=4),
    st.dates().map(str),
    st.datetimes().map(str),
    st.decimals(allow_nan=True).map(str),
    st.uuids().map(str),
)


def tagged(inner):
    tag = tags | json_scalars
    extra = st.dictionaries(any_text, inner, max_size=1)
    return st.builds(lambda t, v, more: {**more, "$bw": t, "v": v}, tag, inner | near_tag_values, extra)


json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4) | tagged(inner),
    max_leaves=15,
)


@PROPERTY
@given(payload=st.dictionaries(any_text, json_values, max_size=4) | json_values)
def test_any_json_with_any_tags_decodes_or_raises_a_decode_error(payload):
    with int_digits_unlimited():  # another service may write integers this process cannot read
        text = json.dumps(payload)
    with contextlib.suppress(PayloadDecodeError):
        decode(text)


@contextlib.contextmanager
def int_digits_unlimited():
    previous = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        yield
    finally:
        sys.set_int_max_str_digits(previous)


EDITS = ["", "[", "]", "{", "}", '"', "\\", ":", ",", "0", "9" * 5000, "-", "e", "\ud800", "\x00", '{"$bw":']


@PROPERTY
@given(value=values, data=st.data())
def test_a_mutated_payload_decodes_or_raises_a_decode_error(value, data):
    try:
        text = encode({"value": value})
    except PayloadError:
        return
    for _ in range(data.draw(st.integers(1, 3))):
        start = data.draw(st.integers(0, len(text)))
        end = data.draw(st.integers(start, min(len(text), start + 8)))
        text = text[:start] + data.draw(st.sampled_from(EDITS) | any_text) + text[end:]
    with contextlib.suppress(PayloadDecodeError):
        decode(text)


@settings(max_examples=25, deadline=None)
@given(
    depth=st.integers(0, 120_000),
    opener=st.sampled_from(["[", '{"a":', '{"$bw":"tuple","v":[', '{"$bw":"date","v":']),
)
def test_json_nested_to_any_depth_decodes_or_raises_a_decode_error(depth, opener):
    closer = {"[": "]", '{"a":': "}", '{"$bw":"tuple","v":[': "]}", '{"$bw":"date","v":': "}"}[opener]
    with contextlib.suppress(PayloadDecodeError):
        decode('{"deep":' + opener * depth + "1" + closer * depth + "}")


secrets = st.text(alphabet="QZXJ", min_size=8, max_size=12)


@PROPERTY
@given(tag=tags, secret=secrets, shape=st.sampled_from(["{}", "[{}]", "[[{}]]", "[{}, 0, 0]", '{"k": {}}']))
def test_a_decode_error_never_quotes_a_value(tag, secret, shape):
    value = shape.replace("{}", json.dumps(secret)) if shape != "{}" else json.dumps(secret)
    try:
        decode(f'{{"x": {{"$bw": "{tag}", "v": {value}}}}}')
    except PayloadDecodeError as exc:
        assert secret not in str(exc)
