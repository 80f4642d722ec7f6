"""Settings every test suite shares."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from hypothesis import settings
from moto import mock_aws
from ranker.training import collector

from local_mode.aws.synthesized_app import quiet_node_environment
from local_mode.container.container_entrypoint import ContainerUnavailable, require_namespaces

PROJECT_ROOT = Path(__file__).resolve().parents[1]
CONTAINER_PARITY_DIR = PROJECT_ROOT / "tests" / "container_parity"

# Triton kernels (ranker.gpu's) run in Triton's interpreter on the CPU: CI has no GPU. Triton reads the switch when it
# is first imported, so it is set here, before any test module can import it.
os.environ["TRITON_INTERPRET"] = "1"
# torch's OpenMP threads sleep when a parallel region ends instead of spinning for the next (OpenMP reads the setting
# when torch loads it, so here, before any test module imports torch; the jobs the tests start inherit it). On 2 cores
# shared by two test workers and their jobs' processes a spinning thread holds the core that the thread it waits for
# needs: the training tests' in-process part takes 12% less CPU and 23% less time.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# The tests that synthesize import aws_cdk, whose Node process prints jsii's end-of-life banner unless told the running
# Node's major version (as the Makefile tells it): here for a session started without make.
os.environ.update(quiet_node_environment())

# Property tests check what holds, not how fast: on a shared 2-core machine one example can take longer than
# Hypothesis' default deadline of 200 ms without anything being wrong. Speed is measured in benchmarks/.
settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")

# The real LETOR sample lives outside the repository (it is not ours to copy in); CI has it beside the clone.
LETOR_SAMPLE_DIR = Path(os.environ.get("LETOR_SAMPLE_DIR", PROJECT_ROOT.parent / "shared" / "data" / "letor-sample"))


def pytest_configure(config: pytest.Config) -> None:
    """The garbage collector is paused while the test modules import (torch, Lightning, the CDK, moto...), and what
    they made is then frozen out of every later collection, as a training job does with its imports: a worker's full
    collections would otherwise walk those objects again and again for the whole run."""
    collector.pause()


def pytest_collection_finish(session: pytest.Session) -> None:
    collector.freeze_imports()


def pytest_unconfigure(config: pytest.Config) -> None:
    collector.thaw()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with a slow test first, each file's tests kept together and in their order. `make test` hands whole files
    to its workers in this order (`--dist loadfile --no-loadscope-reorder`): the quick files come last and fill
    the gaps, so the workers finish together instead of one waiting out a minute-long file handed out at the end
    (pytest-xdist's own order, by number of tests, hands out the long files, which have few tests each, last).
    Within each group the container-parity suite comes last: its environments are built in the background from the
    session's start (tests/container_parity/conftest.py) and are ready by then."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: (item.path not in slow_files, item.path.is_relative_to(CONTAINER_PARITY_DIR)))


@pytest.fixture(scope="session")
def letor_sample_dir() -> Path:
    """Folder holding `rank.train` and `rank.train.query`; skips when the sample is not on this machine."""
    if not (LETOR_SAMPLE_DIR / "rank.train").is_file():
        pytest.skip(f"LETOR sample not found at {LETOR_SAMPLE_DIR}: set LETOR_SAMPLE_DIR to the letor-sample folder")
    return LETOR_SAMPLE_DIR


@pytest.fixture(scope="session")
def container_namespaces() -> None:
    """The hosts of a job that names a ContainerEntrypoint (SDK v3 ModelTrainer's drivers) run in mount and network
    namespaces (local_mode/container/container_entrypoint.py): skips where this machine cannot give them, fails in CI,
    which must run those tests."""
    try:
        require_namespaces()
    except ContainerUnavailable as problem:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the model_trainer launch's hosts: {problem}")
        pytest.skip(str(problem))


@contextmanager
def _aws_mock_keeping_other_state() -> Iterator[None]:
    mock = mock_aws()
    mock.start(reset=False)
    try:
        yield
    finally:
        mock.stop(remove_data=False)


@pytest.fixture
def aws_mock() -> Callable[[], AbstractContextManager[None]]:
    """moto's in-process mock (`with aws_mock(): ...`), started and stopped without `mock_aws`'s reset of every moto
    backend of the process: a test worker also runs local mode's moto server for other test files, and their stacks
    and buckets live in those backends. What a test creates under it stays, so it names its resources its own way."""
    return _aws_mock_keeping_other_state
