"""The Lambda assets (trigger, registrar, watchdog) import in a bare interpreter holding only what the Lambda runtime
provides."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

from stacks.lambda_bundle import LambdaBundleError, stage_lambda_bundle

from .synthesis import SynthesizedApp, function_asset_dir

# What the AWS Lambda Python runtime ships besides the standard library.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "urllib3", "six")
SERVICES = ("training-trigger", "model-registration", "stalled-job-watchdog")
# The functions whose packages link the trigger's client and Powertools set-up, by service and package.
LINKING_PACKAGES = {"model-registration": "model_registration", "stalled-job-watchdog": "job_watchdog"}


def _runtime_site_packages(tmp_path: Path) -> Path:
    """A folder holding only symlinks to the packages the Lambda runtime provides."""
    folder = tmp_path / "runtime"
    folder.mkdir()
    for name in RUNTIME_PROVIDED:
        module = __import__(name)
        origin = Path(module.__file__)
        source = origin.parent if origin.name == "__init__.py" else origin
        (folder / source.name).symlink_to(source)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("service", SERVICES)
def test_handler_imports_with_only_the_bundle_and_the_runtime(dev_app: SynthesizedApp, tmp_path: Path,
                                                              service: str) -> None:
    # Given the synthesized function's asset folder and the runtime's own packages
    asset_dir = function_asset_dir(dev_app, service)
    runtime = _runtime_site_packages(tmp_path)
    probe = textwrap.dedent(f"""
        import importlib.util, json, sys
        sys.path[:] = [{str(asset_dir)!r}, {str(runtime)!r}] + [p for p in sys.path if 'site-packages' not in p]
        import handler
        print(json.dumps({{"handler": callable(getattr(handler, "lambda_handler", None)),
                          "sagemaker": importlib.util.find_spec("sagemaker") is not None}}))
    """)
    # When the handler is imported in an isolated interpreter without site-packages
    result = subprocess.run([sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, timeout=120,
                            env={"AWS_DEFAULT_REGION": "us-east-1", "POWERTOOLS_SERVICE_NAME": "probe"})
    # Then it imports, exposes lambda_handler, and no sagemaker package ships with it
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"handler": True, "sagemaker": False}
    assert not (asset_dir / "sagemaker").exists()


@pytest.mark.parametrize("service", SERVICES)
def test_bundle_carries_the_pinned_powertools(dev_app: SynthesizedApp, service: str) -> None:
    asset_dir = function_asset_dir(dev_app, service)
    version = metadata.version("aws-lambda-powertools")
    assert (asset_dir / "aws_lambda_powertools").is_dir()
    assert (asset_dir / f"aws_lambda_powertools-{version}.dist-info").is_dir()


@pytest.mark.parametrize(("service", "package_name"), LINKING_PACKAGES.items())
def test_the_trigger_modules_linked_into_other_functions_ship_as_files(dev_app: SynthesizedApp, service: str,
                                                                       package_name: str) -> None:
    # The registrar's and the watchdog's packages link the trigger's client and Powertools set-up; their bundles must
    # hold the contents.
    package = function_asset_dir(dev_app, service) / package_name
    for name in ("aws_clients.py", "observability.py"):
        assert not (package / name).is_symlink()
        trigger_module = Path(__file__).resolve().parents[2] / "lambda" / "trigger" / "training_trigger" / name
        assert (package / name).read_text() == trigger_module.read_text()


def _function_dir_requiring(tmp_path: Path, requirement: str) -> Path:
    function_dir = tmp_path / "fn"
    function_dir.mkdir()
    (function_dir / "handler.py").write_text("def lambda_handler(event, context):\n    return None\n")
    (function_dir / "requirements.txt").write_text(requirement + "\n")
    return function_dir


def test_a_version_other_than_the_pin_fails_naming_both(tmp_path: Path) -> None:
    installed = metadata.version("aws-lambda-powertools")
    function_dir = _function_dir_requiring(tmp_path, "aws-lambda-powertools==0.0.1")
    with pytest.raises(LambdaBundleError, match=rf"aws-lambda-powertools==0.0.1 but {installed} is installed"):
        stage_lambda_bundle(function_dir, tmp_path / "staged")


def test_a_distribution_with_compiled_files_is_refused(tmp_path: Path) -> None:
    # Given a requirement on pydantic-core, which ships a compiled extension
    version = metadata.version("pydantic-core")
    function_dir = _function_dir_requiring(tmp_path, f"pydantic-core=={version}")
    with pytest.raises(LambdaBundleError, match=r"pydantic[-_]core==.*compiled file .*\.so"):
        stage_lambda_bundle(function_dir, tmp_path / "staged")


def test_an_unpinned_requirement_is_refused(tmp_path: Path) -> None:
    function_dir = _function_dir_requiring(tmp_path, "aws-lambda-powertools>=3")
    with pytest.raises(LambdaBundleError, match=r"requirements.txt:1: 'aws-lambda-powertools>=3' is not pinned"):
        stage_lambda_bundle(function_dir, tmp_path / "staged")
