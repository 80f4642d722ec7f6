"""cdk-nag, cfn-lint and checkov over every synthesized template: zero unaccepted findings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import App, Stack, Validations
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks

from .synthesis import PROJECT_ROOT, SynthesizedApp, feature_flags

CHECKOV = PROJECT_ROOT / ".venv-checkov" / "bin" / "checkov"


def test_cdk_nag_is_active_and_fails_synthesis_on_an_unacknowledged_finding(tmp_path: Path) -> None:
    # Given an app with the same cdk-nag setup and a bucket that breaks AwsSolutions-S1 (no access logs)
    app = App(outdir=str(tmp_path), context=feature_flags())
    s3.Bucket(Stack(app, "Bad"), "Unlogged", enforce_ssl=True)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    # When it is synthesized / Then synthesis fails naming the rule
    with pytest.raises(Exception, match="AwsSolutions-S1"):
        app.synth()


def test_every_cdk_nag_finding_is_acknowledged_with_a_reason(any_app: SynthesizedApp) -> None:
    # Given the validation report cdk-nag wrote while the fixture synthesized the pipeline
    report = json.loads((any_app.out_dir / "validation-report.json").read_text())
    (nag,) = [plugin for plugin in report["pluginReports"] if plugin["pluginName"] == "AwsSolutions"]
    # Then nothing is left open, and every accepted finding says why in a sentence a reviewer can check
    assert (nag["conclusion"], nag["violations"]) == ("success", [])
    for finding in nag["suppressedViolations"]:
        assert len(finding["reason"]) >= 60, f"{finding['ruleName']}: reason too thin: {finding['reason']!r}"


def _templates(apps: tuple[SynthesizedApp, ...]) -> list[str]:
    """Every template the apps' cdk.out folders hold (nested stacks' included: `*.nested.template.json`)."""
    return sorted(str(path) for app in apps for path in app.out_dir.glob("*.template.json"))


def assert_cfn_lint_finds_no_errors(*apps: SynthesizedApp) -> None:
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    result = subprocess.run([str(cfn_lint), "--non-zero-exit-code", "error", *_templates(apps)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]


def assert_checkov_fails_no_check(*apps: SynthesizedApp) -> None:
    if not CHECKOV.exists():
        pytest.fail(f"{CHECKOV} is missing: run `make setup` (it builds .venv-checkov from requirements-checkov.txt)")
    # (one --file per template: with several --directory, checkov prints one JSON report per folder, back to back)
    files = [argument for template in _templates(apps) for argument in ("--file", template)]
    result = subprocess.run([str(CHECKOV), *files, "--framework", "cloudformation", "--output", "json",
                             "--skip-download"], capture_output=True, text=True, timeout=300)
    report = json.loads(result.stdout)
    reports = report if isinstance(report, list) else [report]
    failed = [f"{check['check_id']} {check['resource']} ({check['file_path']})"
              for item in reports for check in item["results"]["failed_checks"]]
    assert failed == [], "checkov failed checks:\n" + "\n".join(failed)
    skipped = [check for item in reports for check in item["results"]["skipped_checks"]]
    assert all(check.get("check_result", {}).get("suppress_comment") for check in skipped), "a skip has no reason"


# Each linter runs once over both environments' templates: its start-up (checkov's ~4 s of CPU) is paid once.
@pytest.mark.slow
def test_cfn_lint_reports_no_errors(dev_app: SynthesizedApp, prod_app: SynthesizedApp) -> None:
    assert_cfn_lint_finds_no_errors(dev_app, prod_app)


@pytest.mark.slow
def test_checkov_reports_no_failed_checks(dev_app: SynthesizedApp, prod_app: SynthesizedApp) -> None:
    assert_checkov_fails_no_check(dev_app, prod_app)
