"""Where the reliability tests keep their data in moto: bucket names of their own, because every moto server in one
process shares one in-memory backend with the other suites' servers."""

DATA_BUCKET = "reliability-data"
ARTIFACTS_BUCKET = "reliability-artifacts"
DATASET, VERSION = "web search", "2026-11-01"  # one complete version: train, validation, _SUCCESS
VERSION_ROOT = f"datasets/{DATASET}/{VERSION}/"
MARKER_KEY = f"{VERSION_ROOT}_SUCCESS"
MANIFEST_DATASET, MANIFEST_VERSION = "manifested", "v1"  # a train channel, closed by a manifest.json a test writes
MANIFEST_KEY = f"datasets/{MANIFEST_DATASET}/{MANIFEST_VERSION}/manifest.json"
SOURCE_BUNDLE_KEY = "code/reliability/sourcedir.tar.gz"
