"""The @job decorator and the registry: explicit wire names, clear errors, signatures kept."""

from __future__ import annotations

import pytest

from backwave_django import JobContext, JobDefinitionError, job
from backwave_django.registry import Registry, UnknownJob, registry

from .. import jobs


def test_a_job_is_registered_under_its_explicit_wire_name():
    registration = registry.get("tests.add")
    assert registration.queue == "default"
    assert registration.max_attempts == 3
    assert registration.context_parameter == "context"
    assert list(registration.signature.parameters) == ["a", "b"]
    assert registration.handler_path == "tests.jobs.add"


def test_calling_a_job_runs_the_function_directly():
    assert jobs.add(2, 3, context=None) == 5


def test_a_wire_name_is_mandatory():
    with pytest.raises(JobDefinitionError, match="explicit wire name"):

        @job  # type: ignore[arg-type]
        def nameless() -> None: ...


@pytest.mark.parametrize("name", ["", " padded ", "x" * 129])
def test_a_bad_wire_name_is_refused(name):
    with pytest.raises(JobDefinitionError, match="wire name"):
        job(name)


def test_registering_one_wire_name_twice_names_both_functions():
    def first() -> None: ...

    def second() -> None: ...

    local = Registry()
    decorate = job("tests.twice")
    try:
        decorate(first)
        with pytest.raises(JobDefinitionError) as raised:
            job("tests.twice")(second)
    finally:
        registry.unregister("tests.twice")
    message = str(raised.value)
    assert "first" in message and "second" in message and "tests.twice" in message
    assert "tests.twice" not in local


def test_a_parameter_annotated_jobcontext_receives_the_context_whatever_its_name():
    @job("tests.ctx-by-annotation")
    def handler(x: int, ctx: JobContext) -> None: ...

    try:
        registration = registry.get("tests.ctx-by-annotation")
        assert registration.context_parameter == "ctx"
        assert list(registration.signature.parameters) == ["x"]
    finally:
        registry.unregister("tests.ctx-by-annotation")


def test_positional_only_and_var_positional_parameters_are_refused():
    with pytest.raises(JobDefinitionError, match="nameable"):

        @job("tests.varargs")
        def handler(*items: int) -> None: ...

    assert "tests.varargs" not in registry


def test_a_class_job_needs_a_run_method():
    with pytest.raises(JobDefinitionError, match="run"):

        @job("tests.class-without-run")
        class Nothing:
            pass


def test_unknown_wire_names_raise_a_lookup_error_naming_them():
    with pytest.raises(UnknownJob, match="no-such-job"):
        registry.get("no-such-job")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"queue": ""}, "queue"), ({"queue": "q" * 129}, "queue"), ({"max_attempts": 0}, "max_attempts")],
)
def test_bad_job_options_are_refused(kwargs, match):
    with pytest.raises(JobDefinitionError, match=match):
        job("tests.bad-options", **kwargs)


def test_stored_arguments_are_checked_against_the_signature_even_with_an_unhashable_default():
    @job("tests.tagged")
    def tagged(name: str, tags: list = [], context: JobContext | None = None) -> None:  # noqa: B006
        """A default no cache can hold as a key."""

    try:
        registration = registry.get("tests.tagged")
        for _ in range(2):  # the second time from what the first learned, where it could be kept
            assert registration.decode('{"name": "a"}') == {"name": "a"}
            with pytest.raises(Exception, match="missing a required argument: 'name'"):
                registration.decode('{"tags": []}')
    finally:
        registry.unregister("tests.tagged")


def test_what_the_signature_check_learned_is_kept_per_set_of_names():
    registration = registry.get("tests.add")
    assert registration.decode('{"a": 1, "b": 2}') == {"a": 1, "b": 2}
    assert registration.decode('{"a": 5, "b": 7}') == {"a": 5, "b": 7}
    with pytest.raises(Exception, match="missing a required argument: 'b'"):
        registration.decode('{"a": 1}')
