"""Checkpoints that survive spot interruptions.

Rank 0 writes `step-NNNNNNNNN.pt` atomically (temporary file, then rename) into the checkpoint folder, which
SageMaker syncs to S3 and restores on restart; every rank resumes from the newest one. A checkpoint holds what a
resumed run needs to continue exactly where the first stopped: weights, optimizer, scheduler, step, epoch, position
in the epoch, each rank's RNG state and the metric history.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import sagemaker_distributed as distributed
import torch

from ranker.config import ConfigError

_NAME = re.compile(r"^step-(\d{9})\.pt$")
KEEP_LAST = 2


def checkpoint_path(folder: Path, step: int) -> Path:
    return Path(folder) / f"step-{step:09d}.pt"


def latest_checkpoint(folder: Path) -> Path | None:
    folder = Path(folder)
    if not folder.is_dir():
        return None
    found = sorted(p for p in folder.iterdir() if _NAME.match(p.name))
    return found[-1] if found else None


def save_checkpoint(folder: Path, step: int, state: dict[str, Any]) -> Path:
    """Call on rank 0 only. Readers never see a half-written file: they look for the final name only."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    target = checkpoint_path(folder, step)
    temporary = target.with_name(f".{target.name}.tmp")
    torch.save(state, temporary)
    os.replace(temporary, target)
    for old in sorted(p for p in folder.iterdir() if _NAME.match(p.name))[:-KEEP_LAST]:
        old.unlink()
    return target


def load_checkpoint(path: Path) -> dict[str, Any]:
    return torch.load(path, map_location="cpu", weights_only=True)


def rng_state() -> dict[str, Any]:
    """Every generator a step may draw from, in types `torch.load(weights_only=True)` reads (Lightning resumes that
    way): numpy's key as a tensor, not an array."""
    algorithm, key, position, has_gauss, cached_gaussian = np.random.get_state()
    return {"python": random.getstate(), "torch": torch.get_rng_state(),
            "numpy": (algorithm, torch.from_numpy(key.astype(np.int64)), position, has_gauss, cached_gaussian),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    algorithm, key, position, has_gauss, cached_gaussian = state["numpy"]
    np.random.set_state((algorithm, key.numpy().astype(np.uint32), position, has_gauss, cached_gaussian))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int, rank: int) -> None:
    """Each rank draws its own dropout masks, reproducibly."""
    random.seed(seed + rank)
    np.random.seed(seed + rank)
    torch.manual_seed(seed + rank)


def save_training_state(folder: Path, is_main: bool, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                        scheduler: torch.optim.lr_scheduler.LRScheduler, step: int, epoch: int, position: int,
                        history: list[dict[str, float]], best: dict[str, Any] | None = None) -> None:
    """Collective: every rank contributes its RNG state (and, for a sharded optimizer, its moments), rank 0 writes.
    `best` is the model selection's state (ranker.training.selection.BestWeights.state_dict)."""
    rng_states = distributed.all_gather_objects(rng_state())
    optimizer_state = optimizer.state_dict()  # ranker.gpu.sharded_optimizer gathers the whole state on every rank
    if is_main:
        save_checkpoint(folder, step, {"model": model.state_dict(), "optimizer": optimizer_state,
                                       "scheduler": scheduler.state_dict(), "step": step, "epoch": epoch,
                                       "position": position, "rng": rng_states, "history": history, "best": best})


def restore_training_state(folder: Path, model: torch.nn.Module, rank: int, world_size: int) -> dict[str, Any] | None:
    """Loads the newest checkpoint's weights into `model` and returns the rest (optimizer, scheduler, counters) for
    the caller to apply once those exist; None when there is nothing to resume."""
    latest = latest_checkpoint(folder)
    if latest is None:
        return None
    state = load_checkpoint(latest)
    refuse_other_shapes(state["model"], model, latest)
    model.load_state_dict(state["model"])
    state["path"] = latest
    # Another world size draws different per-rank streams anyway; keep this run's fresh seeds then.
    state["rng"] = state["rng"][rank] if len(state["rng"]) == world_size else None
    return state


def shape_differences(saved: dict[str, torch.Tensor], model: torch.nn.Module) -> list[str]:
    """The tensors whose shapes differ between `saved` and `model` (or that only one of them has), each as
    `name: checkpoint (...) vs this run (...)`; empty when the checkpoint fits the model."""
    expected = {name: tuple(value.shape) for name, value in model.state_dict().items()}
    found = {name: tuple(value.shape) for name, value in saved.items()}
    return [f"{name}: checkpoint {found.get(name)} vs this run {expected.get(name)}"
            for name in sorted(expected.keys() | found.keys()) if expected.get(name) != found.get(name)]


def refuse_other_shapes(saved: dict[str, torch.Tensor], model: torch.nn.Module, path: Path) -> None:
    """A checkpoint of another model or data shape (width, layers, feature count) is some other run's: resuming it
    would fail deep in `load_state_dict`, or worse, continue a stranger's training."""
    differing = shape_differences(saved, model)
    if differing:
        raise ConfigError(f"checkpoint_dir: {path} holds a checkpoint of another model or data shape "
                          f"({', '.join(differing[:3])}); pass --checkpoint-dir with a folder of this run's own, or "
                          "empty that folder")
