"""Hyperparameters and directories: one dataclass per concern, filled in one place from CLI flags and SageMaker's
environment.

SageMaker passes each hyperparameter as `--key value`, with the key spelled as the user typed it, so every flag is
accepted with dashes or underscores (`--batch-size` and `--batch_size`). Directories default from the `SM_*`
variables the training toolkit sets, so a plain run inside the container needs no flags at all.

What each field accepts beyond its type sits beside it (`Allowed`): `parse_config` refuses a bad value before any
work with one line naming the flag, the value and what is allowed (`ConfigError`), and `flag_definitions()` hands
the same rules to the stack, which ships them to the trigger so a job with a bad hyperparameter is never started.
This module imports only the standard library and the stdlib-only sagemaker_distributed.paths: the CDK app loads it
at synthesis.
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
from typing import Any

from sagemaker_distributed import paths as sagemaker_paths

TRUE_TEXTS = ("true", "1", "yes")
FALSE_TEXTS = ("false", "0", "no")


class ConfigError(ValueError):
    """A flag or channel the user must fix: one line naming the flag, the value and what is allowed, which the entry
    points print without a traceback."""


@dataclass(frozen=True)
class Allowed:
    """What a field accepts beyond its type. Bounds are inclusive (`minimum`, `maximum`) or exclusive (`above`,
    `below`); `exists`: a path that must exist when the run starts."""

    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None
    below: float | None = None
    exists: bool = False

    def permits(self, value: Any) -> bool:
        if self.choices:
            return value in self.choices
        if self.exists:
            return value is None or Path(value).exists()
        # Each comparison is false for NaN, so NaN is refused wherever a bound is declared.
        bounds = ((self.minimum, lambda bound: value >= bound), (self.maximum, lambda bound: value <= bound),
                  (self.above, lambda bound: value > bound), (self.below, lambda bound: value < bound))
        return all(holds(bound) for bound, holds in bounds if bound is not None)

    def describe(self, kind: str) -> str:
        """What to use instead, e.g. `a number >= 0 and < 1`; `kind` is the field's type name."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.exists:
            return "an existing file or folder"
        bounds = [f"{sign} {_number_text(bound)}" for sign, bound in ((">=", self.minimum), ("<=", self.maximum),
                                                                      (">", self.above), ("<", self.below))
                  if bound is not None]
        return ("a whole number " if kind == "int" else "a number ") + " and ".join(bounds)

    def as_json(self) -> dict[str, Any]:
        # Only the rules declared: a bound of 0 stays, an unset bound (None) or no choices (()) does not.
        return {name: value for name, value in dataclasses.asdict(self).items()
                if value is not None and value != () and value is not False}


def allowed(**rules: Any) -> dict[str, Allowed]:
    """Field metadata declaring what the field accepts: `field(default=0.3, metadata=allowed(minimum=0, below=1))`."""
    return {"allowed": Allowed(**rules)}


def _number_text(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


@dataclass(frozen=True)
class ModelConfig:
    num_features: int = field(default=0, metadata=allowed(minimum=0))
    """Input width; 0 means "take it from the training data"."""
    width: int = field(default=128, metadata=allowed(minimum=1))
    """Units in each hidden dense layer."""
    num_layers: int = field(default=7, metadata=allowed(minimum=1))
    """Dense layers in total, the scoring output layer included."""
    dropout: float = field(default=0.1, metadata=allowed(minimum=0, below=1))
    """Dropout after each hidden layer. The exported weights are the best on validation, so a run that starts to
    overfit loses nothing; more dropout slows learning, and at 0.3 the default model did not learn on small data."""
    norm: str = field(default="layer", metadata=allowed(choices=("layer", "none")))
    """Normalisation after each hidden layer: `layer` or `none` (batch norm would mix padded slots into its stats)."""
    encoding: str = field(default="piecewise", metadata=allowed(choices=("piecewise", "none")))
    """Input encoding fitted on the training channel and kept in the model: `piecewise` (each feature as `bins`
    piecewise-linear values between its own training quantiles, ranker.model.encoding) or `none` (the raw values)."""
    bins: int = field(default=32, metadata=allowed(minimum=1))
    """Bins per feature of the piecewise-linear encoding (fewer where a feature has fewer distinct values): each
    feature's embedding takes `bins` inputs (the first dense layer `num_features * bins` with `embedding_width` 0)."""
    embedding_width: int = field(default=16, metadata=allowed(minimum=0))
    """ReLU units in each of a feature's own dense layers over its encoded values (ranker.model.embedding); the first
    shared dense layer then takes `num_features * embedding_width` inputs. 0 feeds it the encoding directly."""
    embedding_layers: int = field(default=8, metadata=allowed(minimum=1))
    """Dense layers of each feature's own, with `embedding_width` > 0."""
    output_bias: bool = True
    """Bias on the scoring layer. The pairwise and listwise losses are blind to a constant added to every score, so
    its gradient there is pure rounding noise that Adam would amplify; runs with those losses turn it off."""


@dataclass(frozen=True)
class DataConfig:
    train: Path | None = field(default=None, metadata=allowed(exists=True))
    """Training channel: a folder of LETOR text files or binary shards (or one file)."""
    validation: Path | None = field(default=None, metadata=allowed(exists=True))
    """Validation channel; without one, whole queries are split off the training data."""
    test: Path | None = field(default=None, metadata=allowed(exists=True))
    """Test channel, scored once at the end."""
    validation_fraction: float = field(default=0.2, metadata=allowed(above=0, below=1))
    """Share of training queries held out for validation when no validation channel is given."""
    log1p: bool = False
    """Apply `log1p` to features (for heavy-tailed raw counts; LETOR features already in [0, 1] need none)."""
    streaming: bool = False
    """Stream batches from memory-mapped binary shards instead of holding the training set on the device."""
    loader_threads: int = field(default=4, metadata=allowed(minimum=1))
    """Threads filling streamed batches on each process, in parallel: one thread cannot keep a GPU busy at width
    1024 (docs/benchmarks.md, data pipeline)."""
    train_sharded: bool = field(default=False, metadata={"flag": False})
    """This host holds only its own share of the training channel (SageMaker's `ShardedByS3Key`, which the job's
    input data config says: sagemaker_distributed.paths): its ranks split that share, and all ranks agree on what is
    fitted on the training data (ranker.data.sharded_channel). Not a flag: the channel decides."""


@dataclass(frozen=True)
class PathSwitches:
    """Turn single fast paths off, so a benchmark can measure what each is worth (ranker.gpu.fast_paths decides where
    each may run at all). Every default is the run's own path."""

    fused_layers: bool = True
    """False: autocast's Linear + ReLU instead of ranker.gpu.fused_linear's bf16 layers."""
    data_parallel: str = field(default="auto", metadata=allowed(choices=("auto", "ddp")))
    """`auto` (FusedDataParallel where it applies) or `ddp` (PyTorch's DDP everywhere)."""
    shard_optimizer: bool = True
    """False: FusedDataParallel all-reduces and every rank runs the whole AdamW update (ranker.gpu.sharded_optimizer)."""
    allreduce_dtype: str = field(default="fp32", metadata=allowed(choices=("fp32", "bf16")))
    """`bf16`: DDP with its bf16 compression hook (halves the bytes sent, adds cast kernels) instead of fp32."""
    fused_embedding: bool = True
    """False: the per-feature embedding as PyTorch modules (ranker.model.embedding) instead of the Triton kernels
    (ranker.gpu.fused_embedding)."""

    def __post_init__(self) -> None:
        # Benchmarks set these in code, so they are named as fields, not as flags.
        _check_fields(self, lambda name: name)


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = field(default=30, metadata=allowed(minimum=0))
    """Most passes over the training queries (ignored when `max_steps` is set): `early_stopping` usually ends the run
    sooner."""
    max_steps: int = field(default=0, metadata=allowed(minimum=0))
    """Optimizer steps in total; 0 means `epochs` full passes."""
    batch_size: int = field(default=0, metadata=allowed(minimum=0))
    """Queries per batch on each process (a query's documents always stay together). 0 chooses it from the training
    queries (ranker.data.batches.auto_batch_size): 16, doubled while an epoch keeps at least 60 steps, so small
    channels get many updates and large ones steps worth launching on a GPU (128 at 8,000 training queries)."""
    learning_rate: float = field(default=2e-3, metadata=allowed(above=0))
    """Peak AdamW learning rate, reached after warm-up and held until validation stalls (`lr_decay_patience`)."""
    weight_decay: float = field(default=0.01, metadata=allowed(minimum=0))
    """AdamW's decoupled weight decay."""
    warmup_fraction: float = field(default=0.05, metadata=allowed(minimum=0, below=1))
    """Share of all steps (`epochs` of them, or `max_steps`) spent warming the learning rate up linearly."""
    lr_decay_patience: int = field(default=2, metadata=allowed(minimum=0))
    """Validations in a row without a better validation NDCG@10 after which the learning rate is multiplied by
    `lr_decay_factor` (and the count starts again), so that a run anneals before `early_stopping`, a longer patience,
    ends it (ranker.training.schedule). 0: a cosine from the peak to zero over all steps instead, for runs of a fixed
    length (`--early-stopping 0`)."""
    lr_decay_factor: float = field(default=0.1, metadata=allowed(above=0, below=1))
    """What each decay of `lr_decay_patience` multiplies the learning rate by."""
    loss: str = field(default="pairwise",
                      metadata=allowed(choices=("pairwise", "graded_listwise", "listwise", "pointwise")))
    """`pairwise` (RankNet: logistic loss on every pair of a query's documents with different labels; its memory
    grows with the square of the longest query, so for queries of thousands of documents take a listwise loss),
    `graded_listwise` (softmax cross-entropy per query against targets proportional to NDCG's gains
    2^label - 1), `listwise` (against softmax(label), ListNet top-1) or `pointwise` (MSE on the labels)."""
    early_stopping: int = field(default=5, metadata=allowed(minimum=0))
    """Stop after this many validations in a row (one per epoch) without a better validation NDCG@10; 0 trains
    every epoch. Either way the exported weights are those with the best validation NDCG@10 (docs/benchmarks.md,
    early stopping, measures what the patience costs and buys)."""
    seed: int = field(default=0, metadata=allowed(minimum=0))
    """Seeds weights, dropout, the validation split and the batch order."""
    backend: str = field(default="auto", metadata=allowed(choices=("auto", "smddp", "nccl", "gloo")))
    """Process-group backend: `auto`, `smddp`, `nccl` or `gloo`."""
    compile: bool = False
    """Run the model through `torch.compile`."""
    cuda_graph: bool = True
    """On GPU, capture the whole step (forward, backward, all-reduce, optimizer) as a CUDA graph and replay it: one
    launch per step instead of ~150. Eager on CPU and with `--compile true`. train_lightning.py in one process
    replays the forward, loss and backward, and runs Lightning's optimizer step eagerly; across processes its step is
    eager."""
    precision: str = field(default="bf16", metadata=allowed(choices=("bf16", "fp32")))
    """Training arithmetic on GPU: `bf16` autocast (tensor cores, no loss scaling) or `fp32` (for checking
    numerics). CPU runs always use float32."""
    log_every: int = field(default=10, metadata=allowed(minimum=1))
    """Steps between metric lines; the loss is read from the device only then."""
    checkpoint_every: int = field(default=200, metadata=allowed(minimum=0))
    """Steps between checkpoints (0 disables periodic ones; SIGTERM still writes one)."""
    portable_export: bool = True
    """Also write `model.pt2`, the scorer as a `torch.export` program that loads without this package
    (ranker.model.portable, docs/scoring.md). False leaves it out: tracing the scorer takes seconds of CPU at the
    end of every run, which a run whose model is served from `model.pt` or the handler need not spend."""
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
class HardwareDefaults:
    """Defaults sized for the devices a run trains on: each replaces its field's default where no flag sets that field
    (a flag always wins, even one set to the default's own value)."""

    name: str
    """What rank 0's log and metrics.json say the run's defaults were sized for: `cpu` or `gpu`."""
    values: tuple[tuple[str, Any], ...] = ()
    """(`section.field`, value) pairs in place of the fields' own defaults."""

    def config(self) -> RunConfig:
        """The shipped defaults on these devices (no channels)."""
        sections: dict[str, dict[str, Any]] = {"model": {}, "train": {}}
        for key, value in self.values:
            section, name = key.split(".", 1)
            sections[section][name] = value
        return RunConfig(model=ModelConfig(**sections["model"]), train=TrainConfig(**sections["train"]), defaults=self)


# The CPU keeps the fields' own defaults, sized for the 2-core demo. A GPU trains a wider model on smaller batches for
# longer, chosen from a single measurement on one H200 host that benchmarks.ranking.ranking_gpu_defaults repeats
# (docs/benchmarks.md, defaults sized for the hardware).
HARDWARE_DEFAULTS = {
    "cpu": HardwareDefaults("cpu"),
    "cuda": HardwareDefaults("gpu", (("model.width", 2048), ("train.batch_size", 32), ("train.epochs", 100),
                                     ("train.early_stopping", 10))),
}


def hardware_defaults(device_type: str) -> HardwareDefaults:
    """The defaults for a run on `device_type` (`torch.device.type`): the GPU's on `cuda`, else the CPU's."""
    return HARDWARE_DEFAULTS.get(device_type, HARDWARE_DEFAULTS["cpu"])


@dataclass(frozen=True)
class RunConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    defaults: HardwareDefaults = HARDWARE_DEFAULTS["cpu"]
    """The defaults the run took, sized for its devices."""
    flags_over_defaults: tuple[str, ...] = ()
    """The flags the user set where `defaults` has a value of its own (`--batch-size`): theirs won."""

    def describe_defaults(self) -> str:
        """Rank 0's log line saying which defaults the run took and which flags replaced them."""
        if not self.defaults.values:
            return f"defaults: {self.defaults.name} (each flag's own)"
        taken = " ".join(f"{flag_name(key.split('.', 1)[1])} {value}" for key, value in self.defaults.values
                         if flag_name(key.split(".", 1)[1]) not in self.flags_over_defaults)
        overridden = f"; set by flag instead: {' '.join(self.flags_over_defaults)}" if self.flags_over_defaults else ""
        return f"defaults: {self.defaults.name} ({taken or 'none taken'}){overridden}"


def parse_bool(text: str) -> bool:
    """Booleans as SageMaker's SDK encodes them (`true`/`false`) or as a person types them."""
    lowered = text.strip().lower()
    if lowered in TRUE_TEXTS:
        return True
    if lowered in FALSE_TEXTS:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def flag_type_name(config_field: dataclasses.Field) -> str:
    """`bool`, `path`, `int`, `float` or `str`: how a flag's text becomes the field's value."""
    annotation = str(config_field.type)
    if "bool" in annotation:
        return "bool"
    if "Path" in annotation:
        return "path"
    return annotation if annotation in ("int", "float") else "str"


_CONVERTERS = {"bool": parse_bool, "path": Path, "int": int, "float": float, "str": str}


def allowed_of(config_field: dataclasses.Field) -> Allowed:
    return config_field.metadata.get("allowed", Allowed())


def field_docs(config_class: type) -> dict[str, str]:
    """The docstring under each field, so `--help` and the dataclasses cannot disagree."""
    body = ast.parse(inspect.getsource(config_class)).body[0].body
    return {node.target.id: " ".join(following.value.value.split())
            for node, following in zip(body, body[1:])
            if isinstance(node, ast.AnnAssign) and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant) and isinstance(following.value.value, str)}


_SECTIONS = (("model", ModelConfig), ("data", DataConfig), ("train", TrainConfig), ("paths", PathsConfig))


def flag_sections(config: RunConfig) -> dict[str, Any]:
    """The run's flags by section (`model`, `data`, `train`, `paths`), without the provenance beside them (`defaults`,
    `flags_over_defaults`)."""
    return {section: getattr(config, section) for section, _ in _SECTIONS}


def _flag_fields() -> list[tuple[str, dataclasses.Field]]:
    return [(section, config_field) for section, config_class in _SECTIONS
            for config_field in dataclasses.fields(config_class) if config_field.metadata.get("flag", True)]


def flag_name(field_name: str) -> str:
    return f"--{field_name.replace('_', '-')}"


class _FlagParser(argparse.ArgumentParser):
    """argparse that raises ConfigError with its one-line message instead of printing usage and exiting."""

    def error(self, message: str):
        raise ConfigError(f"{message}: see --help for every flag and what it accepts")


def build_parser(description: str = "") -> argparse.ArgumentParser:
    parser = _FlagParser(description=description, argument_default=argparse.SUPPRESS, allow_abbrev=False,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    groups = {}
    for section, config_field in _flag_fields():
        if section not in groups:
            groups[section] = (parser.add_argument_group(section), field_docs(dict(_SECTIONS)[section]))
        group, docs = groups[section]
        name = config_field.name
        spellings = [flag_name(name)] + ([f"--{name}"] if "_" in name else [])
        kind, rules = flag_type_name(config_field), allowed_of(config_field)
        # argparse lists choices itself; ranges and existing paths are said in the help text.
        accepts = f" Takes {rules.describe(kind)}." if rules != Allowed() and not rules.choices else ""
        group.add_argument(*spellings, dest=f"{section}.{name}", type=_CONVERTERS[kind],
                           choices=rules.choices or None, metavar=name.upper(),
                           help=f"{docs.get(name, '')}{accepts} (default: {_default_text(config_field)})")
    return parser


def flag_definitions() -> dict[str, Any]:
    """Every flag as JSON: its type, what it accepts and its default where that is a plain value, by its dashed name.
    The stack ships this to the trigger, which checks a job's hyperparameters against it before starting the job
    (and reads `epochs`' default as the most epochs a Hyperband trial trains when the job sets none)."""
    flags = {}
    for _, config_field in _flag_fields():
        kind, rules = flag_type_name(config_field), allowed_of(config_field)
        default = config_field.default
        flags[flag_name(config_field.name).removeprefix("--")] = {
            "type": kind, **rules.as_json(), **({"use": rules.describe(kind)} if rules != Allowed() else {}),
            **({"default": default} if isinstance(default, (bool, int, float, str)) else {})}
    return {
        "flags": flags,
        "true_texts": list(TRUE_TEXTS),
        "false_texts": list(FALSE_TEXTS),
    }


# Defaults that come from SageMaker's environment rather than from the dataclass (see environment_defaults).
_ENVIRONMENT_DEFAULT_TEXT = {
    "train": "$SM_CHANNEL_TRAIN", "validation": "$SM_CHANNEL_VALIDATION", "test": "$SM_CHANNEL_TEST",
    "model_dir": "$SM_MODEL_DIR, else model", "output_data_dir": "$SM_OUTPUT_DATA_DIR, else output",
    "checkpoint_dir": "in a SageMaker job /opt/ml/checkpoints (synced with S3), else OUTPUT_DATA_DIR/checkpoints",
    "tensorboard_dir": "$SM_OUTPUT_DIR/tensorboard (/opt/ml/output/tensorboard), else output/tensorboard",
}


def _default_text(config_field: dataclasses.Field) -> str:
    on_gpu = [value for key, value in HARDWARE_DEFAULTS["cuda"].values if key.endswith(f".{config_field.name}")]
    own = _ENVIRONMENT_DEFAULT_TEXT.get(config_field.name, repr(config_field.default))
    return f"{own}; {on_gpu[0]!r} on a GPU" if on_gpu else own


def environment_defaults(env: Mapping[str, str]) -> dict[str, object]:
    """Channels (and whether the training channel is sharded) and directories from SageMaker's environment
    (sagemaker_distributed.paths); the checkpoint folder
    follows the output data folder outside a job, so it is resolved after the flags (see parse_config)."""
    defaults: dict[str, object] = {"paths.model_dir": sagemaker_paths.model_dir(env),
                                   "paths.output_data_dir": sagemaker_paths.output_data_dir(env),
                                   "paths.tensorboard_dir": sagemaker_paths.tensorboard_dir(env)}
    for channel in ("train", "validation", "test"):
        folder = sagemaker_paths.channel(channel, env)
        if folder is not None:
            defaults[f"data.{channel}"] = folder
    defaults["data.train_sharded"] = sagemaker_paths.channel_is_sharded("train", env)
    return defaults


def parse_config(argv: Sequence[str], env: Mapping[str, str] = os.environ, description: str = "",
                 device_type: str = "cpu") -> RunConfig:
    """The one place hyperparameters and directories are read: flags win over the environment and over the defaults
    sized for `device_type`, the `torch.device.type` the run trains on (`hardware_defaults`).

    Raises ConfigError, before any data is read, for the first flag or setting the run cannot take."""
    parser = build_parser(description)
    namespace, unknown = parser.parse_known_args(list(argv))
    if unknown:
        raise ConfigError(f"unknown flag(s) {unknown}: remove them or use one of the flags listed by --help")
    # The parser sets only the flags given (argparse.SUPPRESS), so a flag set to a default's own value still wins.
    flagged, hardware = vars(namespace), hardware_defaults(device_type)
    values = {**environment_defaults(env), **dict(hardware.values), **flagged}
    values.setdefault("paths.checkpoint_dir", sagemaker_paths.checkpoint_dir(env, values["paths.output_data_dir"]))
    sections: dict[str, dict[str, object]] = {"model": {}, "data": {}, "train": {}, "paths": {}}
    for key, value in values.items():
        section, name = key.split(".", 1)
        sections[section][name] = value
    config = RunConfig(model=ModelConfig(**sections["model"]), data=DataConfig(**sections["data"]),
                       train=TrainConfig(**sections["train"]), paths=PathsConfig(**sections["paths"]),
                       defaults=hardware, flags_over_defaults=tuple(flag_name(key.split(".", 1)[1])
                                                                    for key, _ in hardware.values if key in flagged))
    validate(config)
    return config


def validate(config: RunConfig) -> None:
    """Raises ConfigError naming the first field outside what it declares it accepts."""
    if config.data.train is None:
        raise ConfigError("--train: no training channel: pass --train DIR or set SM_CHANNEL_TRAIN")
    for section in flag_sections(config).values():
        _check_fields(section, flag_name)
    if config.train.epochs < 1 and config.train.max_steps < 1:
        raise ConfigError(f"--epochs: bad value {config.train.epochs}: train for at least 1 epoch or set --max-steps")


def _check_fields(section: Any, name_of) -> None:
    """Raises ConfigError for the first field of the dataclass `section` whose value its `Allowed` refuses;
    `name_of` turns the field's name into the name the user set it by."""
    for config_field in dataclasses.fields(section):
        rules = allowed_of(config_field)
        value = getattr(section, config_field.name)
        if not rules.permits(value):
            shown = str(value) if isinstance(value, Path) else value
            raise ConfigError(f"{name_of(config_field.name)}: bad value {shown!r}: use "
                              f"{rules.describe(flag_type_name(config_field))}")
