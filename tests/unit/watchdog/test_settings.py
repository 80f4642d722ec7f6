"""The watchdog's environment: a bad value names the variable, the value and the fix."""

from __future__ import annotations

from datetime import timedelta

import pytest
from job_watchdog.settings import SettingsError, settings_from_environ

from watchdog.samples import LOG_GROUP, TOPIC_ARN, stack_environ


def test_the_stacks_environment_reads_into_settings():
    settings = settings_from_environ(stack_environ(STALL_SECONDS="5400"))
    assert (settings.project_prefix, settings.stall, settings.training_log_group, settings.notification_topic_arn) == (
        "ranker", timedelta(minutes=90), LOG_GROUP, TOPIC_ARN)


@pytest.mark.parametrize(("environ", "message"), [
    ({"STALL_SECONDS": "0"}, "STALL_SECONDS='0' is not a positive whole number of seconds"),
    ({"STALL_SECONDS": "1.5"}, "STALL_SECONDS='1.5' is not a positive whole number of seconds"),
    ({"STALL_SECONDS": ""}, "STALL_SECONDS is missing"),
    ({"TRAINING_LOG_GROUP": ""}, "TRAINING_LOG_GROUP is missing"),
    ({"PROJECT_PREFIX": "", "NOTIFICATION_TOPIC_ARN": ""}, "PROJECT_PREFIX is missing"),
])
def test_bad_values_are_refused_with_the_variable_and_the_fix(environ, message):
    with pytest.raises(SettingsError) as raised:
        settings_from_environ(stack_environ(**environ))
    assert message in str(raised.value)
