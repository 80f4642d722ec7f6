"""`model.pt2`: the trained scorer (preprocessing included) as a `torch.export` program, beside the TorchScript
`model.pt` that torch 2.13 deprecates. It loads with `torch.export.load` and needs no code from this package; which
torch versions load which file is measured in docs/scoring.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from ranker.model import export

EXPORTED_PROGRAM = "model.pt2"
# Trace with a few documents, not 0 or 1: torch.export specialises a dimension it sees as 0 or 1 to that size.
_EXAMPLE_DOCUMENTS = 3


def save_exported_program(model_dir: Path, scorer: export.Scorer | None = None) -> Path | None:
    """Exports the scorer saved in `model_dir` (`scorer`: the one `export.save_model` returned, else it is loaded
    from the folder) for any number of documents: `[documents, features] -> [documents]`.

    A model the running torch cannot export (torch.export's coverage grows with each release) gets no `model.pt2`
    and a log line saying why, rather than failing a finished job: the weights, TorchScript and handler serve it."""
    model_dir = Path(model_dir)
    scorer = scorer if scorer is not None else export.load_scorer(model_dir)
    example = torch.zeros(_EXAMPLE_DOCUMENTS, _input_width(model_dir))
    documents = torch.export.Dim("documents")
    try:
        with torch.no_grad():
            program = torch.export.export(scorer, (example,), dynamic_shapes=({0: documents},))
    except Exception as error:  # whatever tracing fails on, the outcome is the same: no portable file
        print(f"{EXPORTED_PROGRAM} not written: torch {torch.__version__} cannot export this model "
              f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})", flush=True)
        return None
    path = model_dir / EXPORTED_PROGRAM
    torch.export.save(program, path)
    return path


def load_exported_program(model_dir: Path) -> nn.Module:
    """The exported scorer as a callable module: `load_exported_program(dir)(features_float32) -> scores`."""
    return torch.export.load(Path(model_dir) / EXPORTED_PROGRAM).module()


def _input_width(model_dir: Path) -> int:
    return int(json.loads((model_dir / export.CONFIG).read_text())["num_features"])
