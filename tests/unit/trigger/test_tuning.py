"""Tuning jobs through the trigger, end to end with botocore Stubbers: a `tuning` section in a manifest or a manual
payload becomes one CreateHyperParameterTuningJob, checked before any call (dry runs included).

The SageMaker Stubber validates every request against the service model and fails on any call not queued: that is
how "refused before any call" is proven.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest

from training_trigger.job_names import dataset_tuning_job_name
from training_trigger.tuning import parse_tuning_section

from trigger.sample_inputs import DATA_BUCKET, job_spec, load_event, stack_settings, write_stack_settings
from trigger.test_handler import (  # noqa: F401 (stack_environment: the handler tests' autouse settings fixture)
    MARKER_ETAG,
    _expect_rejection_notice,
    _invoke,
    _manifest_version,
    _version_listing,
    stack_environment,
)

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics:UserWarning")

RANKER_TUNING = {"max_jobs": 4, "max_parallel_jobs": 2,
                 "ranges": {"learning-rate": {"type": "continuous", "min": 0.0001, "max": 0.01,
                                              "scaling": "Logarithmic"},
                            "epochs": {"type": "integer", "min": 2, "max": 8}}}
TUNING_ARN = "arn:aws:sagemaker:eu-west-1:123456789012:hyper-parameter-tuning-job/ranker-x"


def _dry_run(s3_stub, tuning, **payload_changes):
    payload = {**load_event("manual_dataset.json"), "tuning": tuning, **payload_changes}
    _version_listing(s3_stub, {"_SUCCESS": MARKER_ETAG})
    return _invoke(payload)


def test_a_manifest_tuning_section_starts_one_tuning_job_and_a_redelivery_none(s3_stub, sagemaker_stub, capsys):
    # Given the manifest: the ranker's learning-rate (log) and epochs (integer), 4 trials, 2 at a time
    event = load_event("s3_notification_put.json")
    sent = []
    sagemaker_stub.client.meta.events.register_first(
        "before-parameter-build.sagemaker.CreateHyperParameterTuningJob", lambda params, **_: sent.append(params))
    for _ in range(2):
        _manifest_version(s3_stub, {"tuning": RANKER_TUNING})
    sagemaker_stub.add_response("create_hyper_parameter_tuning_job", {"HyperParameterTuningJobArn": TUNING_ARN})
    sagemaker_stub.add_client_error("create_hyper_parameter_tuning_job", service_error_code="ResourceInUse",
                                    service_message="Tuning job names must be unique within an account and region")
    # When its marker event arrives twice
    first, second = _invoke(event), _invoke(event)
    # Then one tuning job starts, under one name of at most 32 characters; the second is a duplicate
    assert (first["status"], second["status"]) == ("started", "duplicate")
    assert first["job_name"] == second["job_name"] and len(first["job_name"]) <= 32
    assert first["job_name"].startswith("ranker-web-search-")  # the dataset, cut to the room 32 characters leave
    assert first["job_kind"] == "tuning"
    # And the request optimises the ranker's own objective over the two ranges, with the trial's tags
    config = sent[0]["HyperParameterTuningJobConfig"]
    assert config["HyperParameterTuningJobObjective"] == {"Type": "Maximize", "MetricName": "val_ndcg@10"}
    assert config["ResourceLimits"] == {"MaxNumberOfTrainingJobs": 4, "MaxParallelTrainingJobs": 2}
    assert config["ParameterRanges"]["IntegerParameterRanges"] == [
        {"Name": "epochs", "MinValue": "2", "MaxValue": "8", "ScalingType": "Auto"}]
    static = sent[0]["TrainingJobDefinition"]["StaticHyperParameters"]
    assert "epochs" not in static and "learning-rate" not in static and static["loss"] == '"listwise"'
    assert {tag["Key"] for tag in sent[0]["Tags"]} >= {"dataset", "dataset-version", "trigger-source"}
    assert '"DuplicateEvents"' in capsys.readouterr().out


def test_a_manual_dry_run_returns_the_checked_tuning_request(s3_stub, sagemaker_stub):
    # Given the documented manual payload with a tuning section (the Stubber has nothing queued)
    result = _dry_run(s3_stub, RANKER_TUNING)
    # Then the request is returned and nothing starts
    assert result["status"] == "dry_run", result
    assert result["request"]["HyperParameterTuningJobName"] == result["job_name"]
    assert result["request"]["TrainingJobDefinition"]["HyperParameterTuningResourceConfig"]["InstanceCount"] == 2


@pytest.mark.parametrize(("ranges", "message"), [
    ({"dropout": {"type": "continuous", "min": 0.1, "max": 1.5}},
     "tuning.ranges.dropout.max=1.5 is refused by --dropout: use a number >= 0 and < 1"),
    ({"learning-rate": {"type": "continuous", "min": 0, "max": 0.1}},
     "tuning.ranges.learning-rate.min=0 is refused by --learning-rate: use a number > 0"),
    ({"epochs": {"type": "continuous", "min": 1, "max": 4}},
     "tuning.ranges.epochs: --epochs takes whole numbers, and a continuous range gives fractions"),
    ({"loss": {"type": "categorical", "values": ["listwise", "lambdarank"]}},
     "tuning.ranges.loss.values='lambdarank' is refused by --loss: use one of pairwise"),
    ({"epoch": {"type": "integer", "min": 1, "max": 4}},
     "tuning.ranges.epoch is not a flag of the training scripts: did you mean ['epochs'"),
    ({"learning-rate": {"type": "continuous", "min": 0.01, "max": 0.001}},
     "tuning.ranges.learning-rate: min=0.01 is not below max=0.001"),
    ({"weight-decay": {"type": "continuous", "min": 0, "max": 0.1, "scaling": "Logarithmic"}},
     "scaling 'Logarithmic' needs min > 0, not min=0"),
])
def test_a_range_the_scripts_or_sagemaker_refuse_is_refused_in_dry_run(ranges, message, s3_stub, sns_stub,
                                                                       sagemaker_stub):
    _expect_rejection_notice(sns_stub)
    result = _dry_run(s3_stub, {"ranges": ranges})
    assert result["status"] == "rejected"
    assert any(message in error for error in result["errors"]), result["errors"]


@pytest.mark.parametrize(("tuning", "message"), [
    ({**RANKER_TUNING, "objective_metric": "val_map", "objective_type": "Maximize"},
     "tuning.objective_metric='val_map' is not one of the jobs' metric definitions"),
    ({**RANKER_TUNING, "max_jobs": 400},
     "tuning.max_jobs=400 x instance_count=2 x max_runtime=7200 s may use 1600 instance-hours, over the "
     "pipeline's ceiling max_tuning_instance_hours=960: ask for at most 240 jobs"),
    ({**RANKER_TUNING, "max_parallel_jobs": 5}, "tuning.max_parallel_jobs=5 exceeds max_jobs=4"),
    ({**RANKER_TUNING, "strategy": "Hyperband", "max_resource": 8, "early_stopping": "Auto"},
     "early_stopping='Auto' with strategy 'Hyperband'"),
    ({**RANKER_TUNING, "strategy": "Grid"}, "strategy='Grid' searches categorical ranges only"),
    ({"ranges": {f"flag{index}": {"type": "integer", "min": 1, "max": 2} for index in range(31)}},
     "tuning.ranges: 31 ranges exceed SageMaker's 30 per tuning job"),
    ({**RANKER_TUNING, "warm_start": {"parents": ["other-web-search-0123456789"]}},
     "tuning.warm_start.parents: job_name='other-web-search-0123456789' does not start with 'ranker-'"),
])
def test_tuning_rules_are_checked_in_dry_run_before_any_call(tuning, message, s3_stub, sns_stub, sagemaker_stub):
    _expect_rejection_notice(sns_stub)
    result = _dry_run(s3_stub, tuning)
    assert result["status"] == "rejected"
    assert any(message in error for error in result["errors"]), result["errors"]


def test_a_misspelt_default_objective_is_named_first_with_the_one_meant(s3_stub, sns_stub, sagemaker_stub):
    # Given the ranker's section with its default objective misspelt, and no objective_type (the default's is known)
    _expect_rejection_notice(sns_stub)
    # When a dry run asks for it
    result = _dry_run(s3_stub, {**RANKER_TUNING, "objective_metric": "val_ndgc@10"})
    # Then the one error names the misspelt metric and the one meant, not the objective_type a new metric would need
    assert result["status"] == "rejected"
    [error] = result["errors"]
    assert error.startswith("tuning.objective_metric='val_ndgc@10' is not one of the jobs' metric definitions ['epoch'")
    assert "] (did you mean ['val_ndcg@10', 'val_ndcg@1', 'val_ndcg@5']?): SageMaker reads the objective" in error


def test_a_manual_tuning_job_name_over_32_characters_is_refused(s3_stub, sns_stub, sagemaker_stub):
    _expect_rejection_notice(sns_stub)
    result = _dry_run(s3_stub, RANKER_TUNING, job_name="ranker-web-search-tuning-of-november")
    assert result["status"] == "rejected"
    assert any("is not a valid hyper parameter tuning job name: at most 32" in error for error in result["errors"])


def test_a_grid_search_runs_every_combination_by_default(s3_stub, sagemaker_stub):
    tuning = {"strategy": "Grid", "ranges": {"loss": {"type": "categorical", "values": ["listwise", "pairwise"]},
                                             "batch-size": {"type": "categorical", "values": [256, 512, 1024]}}}
    result = _dry_run(s3_stub, tuning)
    assert result["status"] == "dry_run", result
    config = result["request"]["HyperParameterTuningJobConfig"]
    assert config["ResourceLimits"]["MaxNumberOfTrainingJobs"] == 6
    assert config["ParameterRanges"]["CategoricalParameterRanges"][1] == {"Name": "batch-size",
                                                                          "Values": ['"256"', '"512"', '"1024"']}


GRID_RANGES = {"loss": {"type": "categorical", "values": ["listwise", "pairwise"]},
               "batch-size": {"type": "categorical", "values": [256, 512, 1024]}}


@pytest.mark.parametrize("max_jobs", [5, 7])
def test_a_grid_search_with_max_jobs_other_than_its_combinations_is_refused(max_jobs, s3_stub, sns_stub,
                                                                           sagemaker_stub):
    # Given a Grid search over 2 x 3 values asking for fewer, or more, trials than its 6 combinations
    _expect_rejection_notice(sns_stub)
    # When it is dry-run / Then it is refused as SageMaker refuses it: a Grid runs each combination once
    result = _dry_run(s3_stub, {"strategy": "Grid", "max_jobs": max_jobs, "ranges": GRID_RANGES})
    assert result["status"] == "rejected"
    assert (f"tuning.max_jobs={max_jobs} is not the 6 combinations a Grid search runs, each once: leave max_jobs "
            f"out, or set it to 6") in result["errors"]


def test_a_grid_search_may_name_its_number_of_combinations(s3_stub, sagemaker_stub):
    result = _dry_run(s3_stub, {"strategy": "Grid", "max_jobs": 6, "ranges": GRID_RANGES})
    assert result["status"] == "dry_run", result
    assert result["request"]["HyperParameterTuningJobConfig"]["ResourceLimits"]["MaxNumberOfTrainingJobs"] == 6


def test_a_foreign_script_needs_its_own_objective_among_its_metric_definitions(s3_stub, sns_stub, sagemaker_stub,
                                                                               monkeypatch, tmp_path):
    # Given a stack on a user's own script with its own metric, and a tuning section without an objective
    from training_trigger.settings import load_settings

    environ = write_stack_settings(
        tmp_path, bundle_files=["train.py"], default_entry_point="train.py", checked_entry_points=[],
        training_flags={}, default_hyperparameters={}, default_tuning_objective={},
        metric_definitions=[{"Name": "val_auc", "Regex": "val_auc=([0-9.]+)"}])
    monkeypatch.setenv("STATIC_SETTINGS_FILE", environ["STATIC_SETTINGS_FILE"])
    load_settings.cache_clear()
    base = {"dataset": "web search", "version": "2026-11-01", "distribution": "none",
            "instance_type": "ml.g5.2xlarge", "dry_run": True}
    ranges = {"lr": {"type": "continuous", "min": 1e-5, "max": 1e-2, "scaling": "Logarithmic"}}
    _expect_rejection_notice(sns_stub)
    for _ in range(2):
        _version_listing(s3_stub, {"_SUCCESS": MARKER_ETAG})
    # When it is invoked without, then with, its objective
    missing = _invoke({**base, "tuning": {"ranges": ranges}})
    named = _invoke({**base, "tuning": {"ranges": ranges, "objective_metric": "val_auc",
                                        "objective_type": "Maximize"}})
    # Then the first is refused naming the field, the second is built (any flag name: the script is not checked)
    assert missing["status"] == "rejected"
    assert missing["errors"][0].startswith("tuning.objective_metric is missing: entry_point='train.py'")
    assert named["status"] == "dry_run", named
    assert json.loads(named["request"]["TrainingJobDefinition"]["StaticHyperParameters"]["sagemaker_program"]) == \
        "train.py"


def test_an_unknown_tuning_field_is_refused_naming_the_fields(sns_stub, sagemaker_stub):
    _expect_rejection_notice(sns_stub)
    result = _invoke({**load_event("manual_dataset.json"), "tuning": {"max_trials": 4}})
    assert result["status"] == "rejected"
    assert result["errors"][0].startswith("payload.tuning.max_trials is not a tuning field: use one of "
                                          "['objective_metric',")


TUNING_PAGE = Path(__file__).resolve().parents[3] / "docs" / "tuning.md"


def _page_json_blocks() -> list[dict]:
    """The page's manifest (a ```json block) and its payload (`--payload '...'`), as written."""
    page = TUNING_PAGE.read_text()
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", page, flags=re.DOTALL)] + \
        [json.loads(block) for block in re.findall(r"--payload '(.*?)'", page, flags=re.DOTALL)]


def test_the_pages_ranker_manifest_starts_the_tuning_job_it_describes(s3_stub, sagemaker_stub):
    # Given the manifest exactly as docs/tuning.md shows it
    [manifest, _, _] = _page_json_blocks()
    sent = []
    sagemaker_stub.client.meta.events.register_first(
        "before-parameter-build.sagemaker.CreateHyperParameterTuningJob", lambda params, **_: sent.append(params))
    _manifest_version(s3_stub, manifest)
    sagemaker_stub.add_response("create_hyper_parameter_tuning_job", {"HyperParameterTuningJobArn": TUNING_ARN})
    # When its marker event arrives
    assert _invoke(load_event("s3_notification_put.json"))["status"] == "started"
    # Then 4 trials, 2 at a time, maximise val_ndcg@10 on the manifest's instance
    config = sent[0]["HyperParameterTuningJobConfig"]
    assert (config["ResourceLimits"], config["HyperParameterTuningJobObjective"]) == (
        {"MaxNumberOfTrainingJobs": 4, "MaxParallelTrainingJobs": 2}, {"Type": "Maximize", "MetricName": "val_ndcg@10"})
    assert sent[0]["TrainingJobDefinition"]["HyperParameterTuningResourceConfig"]["InstanceType"] == "ml.g5.2xlarge"


def test_the_pages_hyperband_section_runs_as_written_in_dry_run(s3_stub, sagemaker_stub):
    # Given the Hyperband section exactly as docs/tuning.md shows it
    [_, manifest, _] = _page_json_blocks()
    # When a dry run asks for it / Then its trials may train the 8 epochs it gives, Hyperband stopping them from 1 on
    result = _dry_run(s3_stub, manifest["tuning"])
    assert result["status"] == "dry_run", result
    assert result["request"]["HyperParameterTuningJobConfig"]["StrategyConfig"] == {
        "HyperbandStrategyConfig": {"MinResource": 1, "MaxResource": 8}}


def test_the_pages_own_script_payload_runs_as_written_in_dry_run(s3_stub, sagemaker_stub, monkeypatch, tmp_path):
    # Given the stack the page deploys for a script of one's own, and its payload exactly as written
    from training_trigger.settings import load_settings

    environ = write_stack_settings(
        tmp_path, bundle_files=["train.py"], default_entry_point="train.py", checked_entry_points=[],
        training_flags={}, default_hyperparameters={}, default_tuning_objective={},
        metric_definitions=[{"Name": "val_loss", "Regex": "val_loss=([0-9.eE+-]+)"}])
    monkeypatch.setenv("STATIC_SETTINGS_FILE", environ["STATIC_SETTINGS_FILE"])
    load_settings.cache_clear()
    [_, _, payload] = _page_json_blocks()
    # (the dataset's one complete version)
    version = "datasets/web-search/2026-11-01/"
    s3_stub.add_response("list_objects_v2", {"CommonPrefixes": [{"Prefix": version}]}, None)
    s3_stub.add_response("list_objects_v2", {
        "Contents": [{"Key": f"{version}_SUCCESS", "ETag": f'"{MARKER_ETAG}"', "Size": 0,
                      "LastModified": dt.datetime(2026, 11, 1, 6, 12, tzinfo=dt.timezone.utc)}],
        "CommonPrefixes": [{"Prefix": f"{version}train/"}]}, None)
    # When it is invoked
    result = _invoke(payload)
    # Then the checked request is returned, Random search minimising val_loss over the two ranges
    assert result["status"] == "dry_run", result
    config = result["request"]["HyperParameterTuningJobConfig"]
    assert (config["Strategy"], config["RandomSeed"], config["HyperParameterTuningJobObjective"]) == (
        "Random", 7, {"Type": "Minimize", "MetricName": "val_loss"})
    assert config["ParameterRanges"]["CategoricalParameterRanges"] == [
        {"Name": "optimizer", "Values": ['"sgd"', '"adam"']}]


def test_a_payloads_section_goes_over_the_manifests_field_by_field():
    # Given a manifest's section and a payload's that names only the strategy and new ranges
    manifest = parse_tuning_section({**RANKER_TUNING, "early_stopping": "Auto"}, "manifest.json tuning")
    payload = parse_tuning_section({"strategy": "Random", "ranges": {"dropout": {"type": "continuous", "min": 0,
                                                                                 "max": 0.5}}}, "payload.tuning")
    # When the payload's goes over the manifest's
    merged = manifest.then(payload)
    # Then the payload's fields win, whole ranges included, and the manifest's others stay
    assert (merged.strategy, merged.max_jobs, merged.early_stopping) == ("Random", 4, "Auto")
    assert [found.name for found in merged.ranges] == ["dropout"]


@pytest.mark.parametrize("misspelt", ["tunning", "Tuning", "search"])
def test_a_misspelt_manifest_tuning_key_is_refused_instead_of_a_training_job(misspelt, s3_stub, sns_stub,
                                                                             sagemaker_stub):
    # Given a manifest.json whose tuning section sits under another key (a typo, or a guess holding its fields)
    _manifest_version(s3_stub, {"created_by": "ltr-export nightly", misspelt: RANKER_TUNING})
    _expect_rejection_notice(sns_stub)
    # When its marker event arrives
    result = _invoke(load_event("s3_notification_put.json"))
    # Then nothing starts (not even a plain training job), and the key is named with the section it was meant as
    assert result["status"] == "rejected"
    assert result["errors"] == [f"s3://ranker-data-example/datasets/web search/2026-11-01/manifest.json {misspelt} "
                                f"looks like a misspelt 'tuning': tuning settings go under 'tuning'; rename it, or "
                                f"give free metadata a name unlike it"]


def test_the_stacks_defaults_bend_to_what_the_section_asks(s3_stub, sagemaker_stub, monkeypatch, tmp_path):
    # Given a stack whose defaults are 3 parallel trials and early stopping Auto
    from training_trigger.settings import load_settings

    environ = write_stack_settings(tmp_path, tuning_max_parallel_jobs=3, tuning_early_stopping="Auto")
    monkeypatch.setenv("STATIC_SETTINGS_FILE", environ["STATIC_SETTINGS_FILE"])
    load_settings.cache_clear()
    # When a section asks for 2 trials of a Hyperband search, naming neither default
    result = _dry_run(s3_stub, {"strategy": "Hyperband", "max_resource": 8, "max_jobs": 2,
                                "ranges": RANKER_TUNING["ranges"]})
    # Then it runs its 2 trials at once, without early stopping, which Hyperband does not allow
    assert result["status"] == "dry_run", result
    config = result["request"]["HyperParameterTuningJobConfig"]
    assert (config["ResourceLimits"]["MaxParallelTrainingJobs"], config["TrainingJobEarlyStoppingType"]) == (2, "Off")


def _redeploy(monkeypatch, tmp_path, **changes) -> None:
    from training_trigger.settings import load_settings

    monkeypatch.setenv("STATIC_SETTINGS_FILE", write_stack_settings(tmp_path, **changes)["STATIC_SETTINGS_FILE"])
    load_settings.cache_clear()


LEARNING_RATE_ONLY = {"learning-rate": RANKER_TUNING["ranges"]["learning-rate"]}


def _hyperband_config(result) -> dict:
    assert result["status"] == "dry_run", result
    return result["request"]["HyperParameterTuningJobConfig"]["StrategyConfig"]


def test_a_hyperband_search_sends_the_jobs_epochs_as_its_most_resource(s3_stub, sagemaker_stub):
    # Given the documented payload, whose job trains 5 epochs (hyperparameters.epochs), and a Hyperband section
    result = _dry_run(s3_stub, {"strategy": "Hyperband", "ranges": LEARNING_RATE_ONLY})
    # Then the request says how many epochs a trial may train, and that Hyperband may stop one after the first
    assert _hyperband_config(result) == {"HyperbandStrategyConfig": {"MinResource": 1, "MaxResource": 5}}


def test_a_hyperband_search_of_the_shipped_stack_trains_at_most_the_scripts_default_epochs(s3_stub, sagemaker_stub,
                                                                                           monkeypatch, tmp_path):
    # Given the shipped stack (no default hyperparameters) and a payload that sets no epochs: no static hyperparameter
    # SageMaker could infer MaxResource from
    _redeploy(monkeypatch, tmp_path, default_hyperparameters={})
    result = _dry_run(s3_stub, {"strategy": "Hyperband", "ranges": LEARNING_RATE_ONLY}, hyperparameters={})
    # Then the resource is the entry point's own --epochs default, which is what each trial trains
    assert _hyperband_config(result) == {"HyperbandStrategyConfig": {"MinResource": 1, "MaxResource": 30}}


def test_a_hyperband_sections_own_resource_wins(s3_stub, sagemaker_stub):
    result = _dry_run(s3_stub, {"strategy": "Hyperband", "min_resource": 2, "max_resource": 4,
                                "ranges": RANKER_TUNING["ranges"]})
    assert _hyperband_config(result) == {"HyperbandStrategyConfig": {"MinResource": 2, "MaxResource": 4}}


@pytest.mark.parametrize(("tuning", "payload", "message"), [
    # docs/tuning.md's example tunes epochs: SageMaker could infer nothing and would refuse the job
    ({"strategy": "Hyperband", "ranges": RANKER_TUNING["ranges"]}, {},
     "tuning.max_resource is missing: strategy 'Hyperband' needs the most epochs a trial may train "
     "(HyperbandStrategyConfig.MaxResource), which SageMaker infers only from a static "
     "epochs/numepochs/n-epochs/n_epochs/num_epochs hyperparameter, and this job tunes epochs: give "
     "tuning.max_resource (e.g. 10), or set hyperparameters.epochs and leave it untuned"),
    # A script of your own whose job sets no epochs
    ({"strategy": "Hyperband", "objective_metric": "val_loss", "objective_type": "Minimize",
      "ranges": {"lr": {"type": "continuous", "min": 0.001, "max": 0.1}}},
     {"entry_point": "train.py", "hyperparameters": {"lr": 0.01}},
     "tuning.max_resource is missing: strategy 'Hyperband' needs the most epochs a trial may train"),
    ({"strategy": "Hyperband", "max_resource": 20001, "ranges": LEARNING_RATE_ONLY}, {},
     "tuning.max_resource=20001 exceeds Hyperband's 20000 epochs (HyperbandStrategyConfig.MaxResource): lower it"),
    ({"strategy": "Hyperband", "min_resource": 8, "ranges": LEARNING_RATE_ONLY}, {},
     "tuning.min_resource=8 exceeds the most epochs a trial trains, 5 (hyperparameters.epochs)"),
    ({"strategy": "Random", "max_resource": 10, "ranges": LEARNING_RATE_ONLY}, {},
     "tuning.max_resource is for strategy 'Hyperband' only, not 'Random': remove it, or set strategy 'Hyperband'"),
])
def test_a_hyperband_resource_sagemaker_would_refuse_is_refused_naming_the_field(tuning, payload, message, s3_stub,
                                                                                 sns_stub, sagemaker_stub,
                                                                                 monkeypatch, tmp_path):
    # Given a bundle holding a script of the user's beside the project's
    _redeploy(monkeypatch, tmp_path, default_hyperparameters={},
              bundle_files=["train.py", "train_ddp.py", "train_lightning.py"],
              metric_definitions=[{"Name": "val_loss", "Regex": "val_loss=([0-9.]+)"},
                                  {"Name": "val_ndcg@10", "Regex": "val_ndcg@10=([0-9.]+)"}])
    _expect_rejection_notice(sns_stub)
    # When a dry run asks for the search (the SageMaker Stubber has nothing queued: any call fails the test)
    result = _dry_run(s3_stub, tuning, **payload)
    # Then it is refused before any call, naming the field and the fix
    assert result["status"] == "rejected", result
    assert any(error.startswith(message) for error in result["errors"]), result["errors"]


def _tuning_job_description(name: str, dataset: str) -> dict:
    """DescribeHyperParameterTuningJob's answer for a completed tuning job the trigger started on `dataset`: its
    training definition as the trigger builds it (the channels of that dataset's version)."""
    from training_trigger.tuning import ParameterRange, TuningJob
    from training_trigger.tuning_request import build_tuning_job_request

    root = f"s3://{DATA_BUCKET}/datasets/{dataset}/2026-10-01/"
    tuning = TuningJob(objective_metric="val_ndcg@10", objective_type="Maximize", strategy="Bayesian", max_jobs=4,
                       max_parallel_jobs=2, early_stopping="Off",
                       ranges=(ParameterRange("learning-rate", "continuous", 0.0001, 0.01, "Logarithmic"),))
    request = build_tuning_job_request(job_spec(job_name=name, channels={"train": f"{root}train/",
                                                                       "validation": f"{root}validation/"},
                                                tuning=tuning), stack_settings())
    return {"HyperParameterTuningJobName": name, "HyperParameterTuningJobArn": f"{TUNING_ARN.rsplit('/', 1)[0]}/{name}",
            "HyperParameterTuningJobConfig": request["HyperParameterTuningJobConfig"],
            "TrainingJobDefinition": request["TrainingJobDefinition"], "HyperParameterTuningJobStatus": "Completed",
            "CreationTime": dt.datetime(2026, 10, 1, 7, 0, tzinfo=dt.timezone.utc),
            "TrainingJobStatusCounters": {"Completed": 4}, "ObjectiveStatusCounters": {"Succeeded": 4}}


def _warm_start_dry_run(s3_stub, sagemaker_stub, parent: str, parent_dataset: str | None):
    """A dry run of the ranker's section on 'web search', warm-started from `parent`, which SageMaker describes as
    a tuning job of `parent_dataset` (None: it knows no such job)."""
    if parent_dataset is None:
        sagemaker_stub.add_client_error("describe_hyper_parameter_tuning_job", service_error_code="ResourceNotFound",
                                        service_message=f"Amazon SageMaker can't find a tuning job named {parent}",
                                        expected_params={"HyperParameterTuningJobName": parent})
    else:
        sagemaker_stub.add_response("describe_hyper_parameter_tuning_job",
                                    _tuning_job_description(parent, parent_dataset),
                                    {"HyperParameterTuningJobName": parent})
    return _dry_run(s3_stub, {**RANKER_TUNING, "warm_start": {"parents": [parent]}})


def test_a_warm_start_parent_of_another_dataset_sharing_the_cut_name_is_refused(s3_stub, sns_stub, sagemaker_stub):
    # Given a tuning job of 'web search archive', whose name keeps 'web-search-arc' of its dataset in 32 characters
    # and so starts as the names of 'web search''s tuning jobs do
    parent = dataset_tuning_job_name("ranker", "web search archive", "an earlier key")
    assert parent.startswith(dataset_tuning_job_name("ranker", "web search", "any key")[:len("ranker-web-search-")])
    _expect_rejection_notice(sns_stub)
    # When a tuning job of 'web search' names it as its warm start's parent
    result = _warm_start_dry_run(s3_stub, sagemaker_stub, parent, "web search archive")
    # Then SageMaker's description of the parent shows the other dataset, and the section is refused before any call
    # that starts anything
    assert result["status"] == "rejected", result
    assert result["errors"] == [f"tuning.warm_start.parents: {parent!r} trained on dataset 'web search archive', "
                                f"not on this job's dataset 'web search': warm-start from the dataset's own earlier "
                                f"tuning jobs"]


def test_a_warm_start_parent_of_the_same_dataset_is_accepted(s3_stub, sagemaker_stub):
    # Given a tuning job of an earlier version of 'web search'
    parent = dataset_tuning_job_name("ranker", "web search", "an earlier key")
    # When a tuning job of its newer version names it / Then it warm-starts from it
    result = _warm_start_dry_run(s3_stub, sagemaker_stub, parent, "web search")
    assert result["status"] == "dry_run", result
    assert result["request"]["WarmStartConfig"] == {
        "ParentHyperParameterTuningJobs": [{"HyperParameterTuningJobName": parent}],
        "WarmStartType": "TransferLearning"}


def test_a_warm_start_parent_sagemaker_does_not_know_is_refused(s3_stub, sns_stub, sagemaker_stub):
    _expect_rejection_notice(sns_stub)
    result = _warm_start_dry_run(s3_stub, sagemaker_stub, "ranker-web-search-0123456789", None)
    assert result["errors"] == ["tuning.warm_start.parents: 'ranker-web-search-0123456789' is not a tuning job "
                                "SageMaker knows: name an earlier tuning job of this dataset"]
