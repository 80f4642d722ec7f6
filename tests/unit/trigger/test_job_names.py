"""Job names: deterministic per job key (the idempotency key), unique per manual run, always valid."""

from __future__ import annotations

import datetime as dt

import botocore.session
from hypothesis import given
from hypothesis import strategies as st
from training_trigger.job_names import (
    JOB_NAME_PATTERN,
    MAX_LENGTH,
    MAX_TUNING_LENGTH,
    dataset_job_name,
    dataset_tuning_job_name,
    job_name_errors,
    longest_tuning_prefix,
    manual_job_name,
    manual_tuning_job_name,
)

KEY = '{"marker_version": "IYV3p45BT0ac8hjHg1houSdS1a.Mro8e"}'


def test_same_key_gives_same_name_and_another_key_another():
    first = dataset_job_name("ranker", "web search", "2026-11-01", KEY)
    again = dataset_job_name("ranker", "web search", "2026-11-01", KEY)
    rewritten = dataset_job_name("ranker", "web search", "2026-11-01", KEY.replace("IYV3", "Qs9_"))
    assert first == again != rewritten
    assert first.startswith("ranker-web-search-2026-11-01-")


@given(prefix=st.from_regex(r"[a-z][a-z0-9-]{0,19}[a-z0-9]", fullmatch=True),
       dataset=st.text(min_size=1, max_size=200), version=st.text(min_size=1, max_size=80),
       key=st.text(alphabet="0123456789abcdef", min_size=32, max_size=32))
def test_dataset_names_are_always_valid_and_keep_prefix_and_hash(prefix, dataset, version, key):
    name = dataset_job_name(prefix, dataset, version, key)
    assert len(name) <= MAX_LENGTH and JOB_NAME_PATTERN.match(name)
    assert name.startswith(prefix + "-")
    assert job_name_errors(name, prefix) == []
    # the distinguishing hash survives any truncation of the readable part
    assert name != dataset_job_name(prefix, dataset, version, key[::-1]) or key == key[::-1]


def test_manual_names_are_fresh_each_time_and_valid():
    now = dt.datetime(2026, 11, 2, 9, 30, tzinfo=dt.timezone.utc)
    names = {manual_job_name("ranker", "web search", now) for _ in range(20)}
    assert len(names) == 20
    assert all(name.startswith("ranker-web-search-20261102093000-") and not job_name_errors(name, "ranker")
               for name in names)


def test_names_outside_the_prefix_or_pattern_are_refused_with_the_fix():
    assert "does not start with 'ranker-'" in job_name_errors("other-job", "ranker")[0]
    assert "is not a valid training job name" in job_name_errors("ranker-bad_name", "ranker")[0]
    assert "is not a valid training job name" in job_name_errors("ranker-" + "x" * 60, "ranker")[0]


@given(prefix=st.from_regex(r"[a-z][a-z0-9-]{0,19}[a-z0-9]", fullmatch=True),
       dataset=st.one_of(st.none(), st.text(min_size=1, max_size=200)),
       key=st.text(alphabet="0123456789abcdef", min_size=32, max_size=32))
def test_tuning_job_names_fit_32_characters_with_any_prefix_synthesis_accepts(prefix, dataset, key):
    # Given any project prefix of up to 21 characters (the longest synthesis accepts) and any dataset name (or none:
    # explicit channels)
    names = [manual_tuning_job_name(prefix, dataset)]
    if dataset is not None:
        names.append(dataset_tuning_job_name(prefix, dataset, key))
    # Then every tuning job name is one SageMaker accepts, within the trigger's permissions
    for name in names:
        assert job_name_errors(name, prefix, tuning=True) == [], name
        assert len(name) <= MAX_TUNING_LENGTH


def test_the_longest_prefix_names_tuning_jobs_and_one_more_character_cannot():
    # Given the longest prefix the naming rule allows, and one a character longer
    longest = "r" * longest_tuning_prefix()
    # Then manual and dataset tuning job names fit with the first and not with the second
    assert job_name_errors(manual_tuning_job_name(longest, "web search"), longest, tuning=True) == []
    assert job_name_errors(dataset_tuning_job_name(longest, "web search", KEY), longest, tuning=True) == []
    assert job_name_errors(manual_tuning_job_name(longest + "r", None), longest + "r", tuning=True) != []


def test_the_tuning_name_limit_is_the_api_models():
    model = botocore.session.get_session().get_service_model("sagemaker")
    assert MAX_TUNING_LENGTH == model.shape_for("HyperParameterTuningJobName").metadata["max"]


def test_a_tuning_job_name_is_deterministic_per_key_and_fresh_per_manual_run():
    assert dataset_tuning_job_name("ranker", "web search", KEY) == dataset_tuning_job_name("ranker", "web search",
                                                                                           KEY)
    assert dataset_tuning_job_name("ranker", "web search", KEY) != dataset_tuning_job_name("ranker", "web search",
                                                                                           KEY + "x")
    names = {manual_tuning_job_name("ranker", "web search") for _ in range(20)}
    assert len(names) == 20 and all(name.startswith("ranker-web-search-") for name in names)


def test_a_tuning_job_name_over_32_characters_is_refused_naming_the_limit():
    [error] = job_name_errors("ranker-web-search-tuning-of-november", "ranker", tuning=True)
    assert "hyper parameter tuning job name: at most 32" in error
