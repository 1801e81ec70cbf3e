"""Tags: what the one set of rules accepts, the stored form it gives, and what it says about the rest."""

from __future__ import annotations

import pytest

from backwave_django.core.tags import (
    MAX_KEY_LENGTH,
    MAX_TAG_LENGTH,
    MAX_TAGS_PER_JOB,
    MAX_VALUE_LENGTH,
    TagError,
    normalise,
    normalise_all,
    split,
    stored_tag_problem,
)


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("urgent", "urgent"),
        ("v2.report_x-1", "v2.report_x-1"),
        (("tenant", "acme"), "tenant:acme"),
        (("url", "https://x.test:8080/a"), "url:https://x.test:8080/a"),
        (("name", "Zoë Ünal"), "name:Zoë Ünal"),
        (("k" * MAX_KEY_LENGTH, "v" * MAX_VALUE_LENGTH), "k" * MAX_KEY_LENGTH + ":" + "v" * MAX_VALUE_LENGTH),
    ],
)
def test_a_good_tag_is_stored_as_a_label_or_key_colon_value(given: object, stored: str) -> None:
    assert normalise(given) == stored
    assert stored_tag_problem(stored) is None
    assert split(stored) == given
    assert len(stored) <= MAX_TAG_LENGTH


def test_a_value_is_stored_in_nfc_so_two_spellings_are_one_tag() -> None:
    decomposed, composed = ("city", "Mälmo\u0308"), ("city", "Mälmö")
    assert normalise(decomposed) == normalise(composed) == "city:Mälmö"
    assert stored_tag_problem("city:Mälmo\u0308") is not None  # a store is given the stored form only


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("", "tag label ''"),
        ("tenant:acme", "give a (key, value) pair"),
        ("has space", "tag label 'has space'"),
        ("-dash", "tag label"),
        ("é", "tag label"),
        ("nul\x00", "tag label"),
        ("x" * (MAX_KEY_LENGTH + 1), "tag label"),
        ("x" * 10_000_000, "(10000000 characters)"),
        (("", "acme"), "tag key ''"),
        (("a:b", "acme"), "tag key 'a:b'"),
        (("tenant", ""), "tag value ''"),
        (("tenant", " acme"), "tag value"),
        (("tenant", "ac\x00me"), "tag value"),
        (("tenant", "ac\ud800me"), "tag value"),
        (("tenant", "line\nbreak"), "tag value"),
        (("tenant", "v" * (MAX_VALUE_LENGTH + 1)), "tag value"),
        (("tenant", "v" * 10_000_000), "(10000000 characters)"),
        (("tenant", 3), "a keyed tag is a pair of str, not ('tenant', 3)"),
        ((b"tenant", "acme"), "a keyed tag is a pair of str"),
        (("a", "b", "c"), "got a tuple"),
        (["tenant", "acme"], "got a list"),
        (42, "got 42"),
        (None, "got None"),
        (b"urgent", "got a bytes"),
    ],
)
def test_a_bad_tag_is_refused_with_a_message_naming_it(bad: object, says: str) -> None:
    with pytest.raises(TagError) as refused:
        normalise(bad)
    assert says in str(refused.value)
    assert len(str(refused.value)) < 400  # a huge value is never repeated whole


def test_a_str_subclass_is_refused_so_nothing_but_a_plain_str_is_stored() -> None:
    class Sneaky(str):
        pass

    with pytest.raises(TagError):
        normalise(Sneaky("urgent"))


def test_tags_are_a_set_sorted_and_each_once() -> None:
    assert normalise_all(["b", ("t", "x"), "a", "b", ("t", "x")]) == ("a", "b", "t:x")
    assert normalise_all(iter(())) == ()
    assert normalise_all([("t", "x"), "c"], adding_to=("a", "t:x")) == ("a", "c", "t:x")


@pytest.mark.parametrize("bad", ["urgent", b"urgent", 7, None])
def test_tags_must_be_a_collection_not_one_tag(bad: object) -> None:
    with pytest.raises(TagError, match="tags must be a list of tags"):
        normalise_all(bad)


def test_at_most_max_tags_per_job_at_a_time() -> None:
    assert len(normalise_all(f"t{i}" for i in range(MAX_TAGS_PER_JOB))) == MAX_TAGS_PER_JOB
    assert len(normalise_all(["same"] * (MAX_TAGS_PER_JOB * 2))) == 1  # repeats do not count
    with pytest.raises(TagError, match=f"at most {MAX_TAGS_PER_JOB} tags"):
        normalise_all(f"t{i}" for i in range(MAX_TAGS_PER_JOB + 1))


@pytest.mark.parametrize("bad", [3, "", "a b", "tenant:", "tenant: acme", ":acme", "x" * 300])
def test_a_store_refuses_what_is_not_a_stored_tag(bad: object) -> None:
    assert stored_tag_problem(bad) is not None


def test_a_tag_key_alone_follows_the_label_rule() -> None:
    from backwave_django.core.tags import tag_key_problem

    assert tag_key_problem("tenant") is None
    assert "tag key 'a b'" in (tag_key_problem("a b") or "")
    assert tag_key_problem(7) == "a tag key must be a str, not 7"
