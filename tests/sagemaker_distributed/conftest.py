"""Fixtures for the generic package's tests."""

from __future__ import annotations

import sys

import pytest

STAND_IN_SMDDP = '''"""Stands in for SMDDP's torch backend module: importing it is how the package detects SMDDP."""
'''


@pytest.fixture
def smddp_stand_in(tmp_path, monkeypatch):
    """A `smdistributed.dataparallel.torch.torch_smddp` that imports, as it does in the AWS containers that ship
    SMDDP (the real one needs their CUDA build)."""
    package = tmp_path / "stand_in" / "smdistributed" / "dataparallel" / "torch"
    package.mkdir(parents=True)
    for folder in (package, package.parent, package.parent.parent):
        (folder / "__init__.py").write_text("")
    (package / "torch_smddp.py").write_text(STAND_IN_SMDDP)
    monkeypatch.syspath_prepend(str(tmp_path / "stand_in"))
    yield
    for name in [name for name in sys.modules if name.startswith("smdistributed")]:
        del sys.modules[name]
