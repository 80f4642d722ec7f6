"""Synthesis as local mode runs it: the app command from cdk.json, cached per context and sources."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from local_mode.aws.synthesized_app import synthesize

pytestmark = pytest.mark.slow


def test_two_syntheses_of_different_contexts_at_once_both_complete(tmp_path):
    # Given two contexts, whose assemblies differ and so are synthesized apart (as a demo beside a test session)
    contexts = [{"distribution": "none"}, {"distribution": "torch_distributed"}]
    # When both are synthesized at the same time
    with ThreadPoolExecutor(max_workers=len(contexts)) as pool:
        assemblies = list(pool.map(lambda context: synthesize(cache_dir=tmp_path, context=context), contexts))
    # Then each is a complete assembly of its own, whose every file asset lies inside it
    assert assemblies[0] != assemblies[1]
    for assembly in assemblies:
        manifest = json.loads((assembly / "manifest.json").read_text())
        for name in (artifact["properties"]["file"] for artifact in manifest["artifacts"].values()
                     if artifact["type"] == "cdk:asset-manifest"):
            files = json.loads((assembly / name).read_text())["files"]
            assert files and all((assembly / asset["source"]["path"]).exists() for asset in files.values())
