"""The registrar's environment: a bad value names the variable, the value and the fix."""

from __future__ import annotations

import pytest
from model_registration.settings import SettingsError, Threshold, settings_from_environ

from registrar.samples import TOPIC_ARN, stack_environ


def test_the_stacks_environment_reads_into_settings():
    settings = settings_from_environ(stack_environ(THRESHOLD_METRIC="val_ndcg@10", THRESHOLD_MINIMUM="0.8"))
    assert settings.project_prefix == "ranker" and settings.notification_topic_arn == TOPIC_ARN
    assert settings.threshold == Threshold("val_ndcg@10", 0.8)
    assert "epoch" not in settings.quality_metrics and "test_ndcg@10" in settings.quality_metrics


def test_no_threshold_variables_mean_no_threshold():
    assert settings_from_environ(stack_environ()).threshold is None


@pytest.mark.parametrize(("environ", "message"), [
    ({"THRESHOLD_METRIC": "val_ndcg@10"}, "THRESHOLD_METRIC='val_ndcg@10' and THRESHOLD_MINIMUM='': set both"),
    ({"THRESHOLD_METRIC": "val_ndcg@10", "THRESHOLD_MINIMUM": "high"}, "THRESHOLD_MINIMUM='high' is not a finite"),
    ({"THRESHOLD_METRIC": "epoch", "THRESHOLD_MINIMUM": "3"}, "THRESHOLD_METRIC='epoch' is not one of"),
    ({"PROJECT_PREFIX": ""}, "PROJECT_PREFIX is missing"),
    ({"INFERENCE_IMAGE_URI": ""}, "INFERENCE_IMAGE_URI is missing"),
    ({"INFERENCE_INSTANCE_TYPE": ""}, "INFERENCE_INSTANCE_TYPE is missing"),
])
def test_bad_values_are_refused_with_the_variable_and_the_fix(environ, message):
    with pytest.raises(SettingsError) as raised:
        settings_from_environ(stack_environ(**environ))
    assert message in str(raised.value)


def test_a_script_that_reports_no_model_metric_still_has_its_models_registered():
    # Given a stack whose metric definitions are run counters only (a script of the user's own) / Then the list is
    # empty, not missing
    assert settings_from_environ(stack_environ(MODEL_QUALITY_METRICS="")).quality_metrics == ()
    environ = stack_environ()
    del environ["MODEL_QUALITY_METRICS"]
    with pytest.raises(SettingsError, match="MODEL_QUALITY_METRICS is missing"):
        settings_from_environ(environ)
