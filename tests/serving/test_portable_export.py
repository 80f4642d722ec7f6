"""The artifact's model.pt2 (torch.export) scores as the trained model does, for any number of documents."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ranker.data.channels import load_channel
from ranker.model.export import load_scorer
from ranker.model.portable import EXPORTED_PROGRAM, load_exported_program

pytestmark = pytest.mark.slow


def test_the_exported_program_scores_within_1e_5_of_the_trained_model(trained_job):
    # Given the job's test rows, raw, and rows far outside the training range (the preprocessing must be in the file)
    test = load_channel(trained_job.test_dir).features
    outliers = np.random.default_rng(0).exponential(50.0, size=(7, test.shape[1])).astype(np.float32)
    features = torch.from_numpy(np.concatenate([test, outliers]))
    # When the job's model.pt2 and the trained scorer score them, one document, a few, and all at once
    program, scorer = load_exported_program(trained_job.model_dir), load_scorer(trained_job.model_dir)
    assert (trained_job.model_dir / EXPORTED_PROGRAM).is_file()
    with torch.no_grad():
        for rows in (features[:1], features[:5], features):
            # Then the scores agree within 1e-5
            torch.testing.assert_close(program(rows), scorer(rows), atol=1e-5, rtol=0)
