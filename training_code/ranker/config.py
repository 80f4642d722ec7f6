"""Hyperparameters and directories: one dataclass per concern, filled in one place from CLI flags and SageMaker's
environment.

SageMaker passes each hyperparameter as `--key value`, with the key spelled as the user typed it, so every flag is
accepted with dashes or underscores (`--batch-size` and `--batch_size`). Directories default from the `SM_*`
variables the training toolkit sets, so a plain run inside the container needs no flags at all.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sagemaker_distributed import paths as sagemaker_paths


class ConfigError(ValueError):
    """A flag or channel the user must fix: the entry points print its one line, without a traceback."""


@dataclass(frozen=True)
class ModelConfig:
    num_features: int = 0
    """Input width; 0 means "take it from the training data"."""
    width: int = 128
    """Units in each hidden dense layer."""
    num_layers: int = 7
    """Dense layers in total, the scoring output layer included."""
    dropout: float = 0.3
    """Dropout after each hidden layer (0.3 beat 0.1 on every held-out split of the LETOR sample tried)."""
    norm: str = "layer"
    """Normalisation after each hidden layer: `layer` or `none` (batch norm would mix padded slots into its stats)."""
    encoding: str = "piecewise"
    """Input encoding fitted on the training channel and kept in the model: `piecewise` (each feature as `bins`
    piecewise-linear values between its own training quantiles, ranker.model.encoding) or `none` (the raw values)."""
    bins: int = 8
    """Bins per feature of the piecewise-linear encoding (fewer where a feature has fewer distinct values); the first
    dense layer takes `num_features * bins` inputs."""
    output_bias: bool = True
    """Bias on the scoring layer. The listwise losses are blind to a constant added to every score, so its gradient
    there is pure rounding noise that Adam would amplify; runs with those losses turn it off."""


@dataclass(frozen=True)
class DataConfig:
    train: Path | None = None
    """Training channel: a folder of LETOR text files or binary shards (or one file)."""
    validation: Path | None = None
    """Validation channel; without one, whole queries are split off the training data."""
    test: Path | None = None
    """Test channel, scored once at the end."""
    validation_fraction: float = 0.2
    """Share of training queries held out for validation when no validation channel is given."""
    log1p: bool = False
    """Apply `log1p` to features (for heavy-tailed raw counts; LETOR features already in [0, 1] need none)."""
    streaming: bool = False
    """Stream batches from memory-mapped binary shards instead of holding the training set on the device."""
    loader_threads: int = 4
    """Threads filling streamed batches on each process, in parallel: one thread cannot keep a GPU busy at width
    1024 (docs/benchmarks.md, data pipeline)."""


@dataclass(frozen=True)
class PathSwitches:
    """Turn single fast paths off, so a benchmark can measure what each is worth (ranker.gpu.fast_paths decides where
    each may run at all). Every default is the run's own path."""

    fused_layers: bool = True
    """False: autocast's Linear + ReLU instead of ranker.gpu.fused_linear's bf16 layers."""
    data_parallel: str = "auto"
    """`auto` (FusedDataParallel where it applies) or `ddp` (PyTorch's DDP everywhere)."""
    shard_optimizer: bool = True
    """False: FusedDataParallel all-reduces and every rank runs the whole AdamW update (ranker.gpu.sharded_optimizer)."""
    allreduce_dtype: str = "fp32"
    """`bf16`: DDP with its bf16 compression hook (halves the bytes sent, adds cast kernels) instead of fp32."""

    def __post_init__(self) -> None:
        for name, allowed in (("data_parallel", ("auto", "ddp")), ("allreduce_dtype", ("fp32", "bf16"))):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}: bad value {getattr(self, name)!r}: use one of {', '.join(allowed)}")


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 20
    """Passes over the training queries (ignored when `max_steps` is set)."""
    max_steps: int = 0
    """Optimizer steps in total; 0 means `epochs` full passes."""
    batch_size: int = 32
    """Queries per batch on each process (a query's documents always stay together)."""
    learning_rate: float = 2e-3
    """Peak AdamW learning rate, reached after warm-up, then cosine decay to zero."""
    weight_decay: float = 0.01
    """AdamW's decoupled weight decay."""
    warmup_fraction: float = 0.05
    """Share of all steps spent warming the learning rate up linearly."""
    loss: str = "graded_listwise"
    """`graded_listwise` (softmax cross-entropy per query against targets proportional to NDCG's gains
    2^label - 1), `listwise` (against softmax(label), ListNet top-1) or `pointwise` (MSE on the labels)."""
    early_stopping: int = 0
    """Stop after this many validations in a row (one per epoch) without a better validation NDCG@10; 0 trains
    every epoch. Either way the exported weights are those with the best validation NDCG@10."""
    seed: int = 0
    """Seeds weights, dropout, the validation split and the batch order."""
    backend: str = "auto"
    """Process-group backend: `auto`, `smddp`, `nccl` or `gloo`."""
    compile: bool = False
    """Run the model through `torch.compile`."""
    cuda_graph: bool = True
    """On GPU, capture the whole step (forward, backward, all-reduce, optimizer) as a CUDA graph and replay it: one
    launch per step instead of ~150. Eager on CPU and with `--compile true`."""
    precision: str = "bf16"
    """Training arithmetic on GPU: `bf16` autocast (tensor cores, no loss scaling) or `fp32` (for checking
    numerics). CPU runs always use float32."""
    log_every: int = 10
    """Steps between metric lines; the loss is read from the device only then."""
    checkpoint_every: int = 200
    """Steps between checkpoints (0 disables periodic ones; SIGTERM still writes one)."""
    switches: PathSwitches = field(default_factory=PathSwitches, metadata={"flag": False})
    """The fast paths' switches, for the benchmarks' ablations (not flags: a run takes every fast path its torch and
    hardware allow, ranker.gpu.fast_paths)."""


@dataclass(frozen=True)
class PathsConfig:
    model_dir: Path = Path("model")
    """Where the trained model's artifacts go (SageMaker uploads it as model.tar.gz); `model` outside SageMaker."""
    output_data_dir: Path = Path("output")
    """Where plots go (uploaded as output.tar.gz); `output` outside SageMaker."""
    checkpoint_dir: Path = Path("output/checkpoints")
    """Checkpoints to write and to resume from (SageMaker syncs this folder with S3 when checkpointing is on). A
    checkpoint of another model or data shape is refused, never resumed."""
    tensorboard_dir: Path = Path("output/tensorboard")
    """Where train_lightning.py writes TensorBoard logs when tensorboard is installed (SageMaker uploads this folder
    while the job runs when the job has a TensorBoardOutputConfig with the same LocalPath)."""


@dataclass(frozen=True)
class RunConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)


_CHOICES = {"norm": ("layer", "none"), "encoding": ("piecewise", "none"),
            "loss": ("graded_listwise", "listwise", "pointwise"), "backend": ("auto", "smddp", "nccl", "gloo")}


def parse_bool(text: str) -> bool:
    """Booleans as SageMaker's SDK encodes them (`true`/`false`) or as a person types them."""
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _flag_type(annotation: str):
    if "bool" in annotation:
        return parse_bool
    if "Path" in annotation:
        return Path
    return {"int": int, "float": float}.get(annotation, str)


def field_docs(config_class: type) -> dict[str, str]:
    """The docstring under each field, so `--help` and the dataclasses cannot disagree."""
    body = ast.parse(inspect.getsource(config_class)).body[0].body
    return {node.target.id: " ".join(following.value.value.split())
            for node, following in zip(body, body[1:])
            if isinstance(node, ast.AnnAssign) and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant) and isinstance(following.value.value, str)}


def build_parser(description: str = "") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description, argument_default=argparse.SUPPRESS, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    for section, config_class in (("model", ModelConfig), ("data", DataConfig), ("train", TrainConfig),
                                  ("paths", PathsConfig)):
        group = parser.add_argument_group(section)
        docs = field_docs(config_class)
        for config_field in dataclasses.fields(config_class):
            if not config_field.metadata.get("flag", True):
                continue
            name = config_field.name
            spellings = [f"--{name.replace('_', '-')}"] + ([f"--{name}"] if "_" in name else [])
            group.add_argument(*spellings, dest=f"{section}.{name}", type=_flag_type(str(config_field.type)),
                               choices=_CHOICES.get(name), metavar=name.upper(),
                               help=f"{docs.get(name, '')} (default: {_default_text(config_field)})")
    return parser


# Defaults that come from SageMaker's environment rather than from the dataclass (see environment_defaults).
_ENVIRONMENT_DEFAULT_TEXT = {
    "train": "$SM_CHANNEL_TRAIN", "validation": "$SM_CHANNEL_VALIDATION", "test": "$SM_CHANNEL_TEST",
    "model_dir": "$SM_MODEL_DIR, else model", "output_data_dir": "$SM_OUTPUT_DATA_DIR, else output",
    "checkpoint_dir": "in a SageMaker job /opt/ml/checkpoints (synced with S3), else OUTPUT_DATA_DIR/checkpoints",
    "tensorboard_dir": "$SM_OUTPUT_DIR/tensorboard (/opt/ml/output/tensorboard), else output/tensorboard",
}


def _default_text(config_field: dataclasses.Field) -> str:
    return _ENVIRONMENT_DEFAULT_TEXT.get(config_field.name, repr(config_field.default))


def environment_defaults(env: Mapping[str, str]) -> dict[str, object]:
    """Channels and directories from SageMaker's environment (sagemaker_distributed.paths); the checkpoint folder
    follows the output data folder outside a job, so it is resolved after the flags (see parse_config)."""
    defaults: dict[str, object] = {"paths.model_dir": sagemaker_paths.model_dir(env),
                                   "paths.output_data_dir": sagemaker_paths.output_data_dir(env),
                                   "paths.tensorboard_dir": sagemaker_paths.tensorboard_dir(env)}
    for channel in ("train", "validation", "test"):
        folder = sagemaker_paths.channel(channel, env)
        if folder is not None:
            defaults[f"data.{channel}"] = folder
    return defaults


def parse_config(argv: Sequence[str], env: Mapping[str, str] = os.environ, description: str = "") -> RunConfig:
    """The one place hyperparameters and directories are read: flags win over the environment."""
    parser = build_parser(description)
    namespace, unknown = parser.parse_known_args(list(argv))
    if unknown:
        parser.error(f"unknown flag(s) {unknown}: remove them or use one of the flags listed by --help")
    values = {**environment_defaults(env), **vars(namespace)}
    values.setdefault("paths.checkpoint_dir", sagemaker_paths.checkpoint_dir(env, values["paths.output_data_dir"]))
    sections: dict[str, dict[str, object]] = {"model": {}, "data": {}, "train": {}, "paths": {}}
    for key, value in values.items():
        section, name = key.split(".", 1)
        sections[section][name] = value
    config = RunConfig(model=ModelConfig(**sections["model"]), data=DataConfig(**sections["data"]),
                       train=TrainConfig(**sections["train"]), paths=PathsConfig(**sections["paths"]))
    validate(config)
    return config


def validate(config: RunConfig) -> None:
    if config.data.train is None:
        raise ConfigError("train: no training channel; pass --train DIR or set SM_CHANNEL_TRAIN")
    checks = [
        ("batch_size", config.train.batch_size, config.train.batch_size >= 1, "use at least 1 query per batch"),
        ("num_layers", config.model.num_layers, config.model.num_layers >= 1, "use at least 1 dense layer"),
        ("bins", config.model.bins, config.model.bins >= 1, "use at least 1 bin per feature"),
        ("early_stopping", config.train.early_stopping, config.train.early_stopping >= 0,
         "use 0 (off) or a number of validations"),
        ("loader_threads", config.data.loader_threads, config.data.loader_threads >= 1, "use at least 1 thread"),
        ("validation_fraction", config.data.validation_fraction, 0 < config.data.validation_fraction < 1,
         "use a fraction strictly between 0 and 1"),
        ("precision", config.train.precision, config.train.precision in ("bf16", "fp32"), "use bf16 or fp32"),
        ("epochs", config.train.epochs, config.train.epochs >= 1 or config.train.max_steps > 0,
         "train for at least 1 epoch or set --max-steps"),
    ]
    for name, value, ok, fix in checks:
        if not ok:
            raise ConfigError(f"{name}: bad value {value!r}: {fix}")
