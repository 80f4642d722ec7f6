"""The models the throughput benchmarks measure, by name, and the line each table prints about the one it ran.

- `plain MLP`: the dense layers alone on the raw features (no encoding, no per-feature embedding, no norm, no
  dropout): the model the naive peers (benchmarks/baselines) also train, so the peer comparison is like for like;
- `shipped model`: `ModelConfig()` as a job trains it (the encoding, the per-feature embeddings, LayerNorm and
  dropout), at any width a benchmark asks for.

Every GPU table in docs/benchmarks.md names its model with `describe`, generated from the configuration itself, so a
table measured on a model that no longer ships stops matching the code (tests/unit/test_benchmark_models.py).
"""

from __future__ import annotations

import dataclasses

from ranker.config import ModelConfig

PLAIN_MLP, SHIPPED_MODEL = "plain MLP", "shipped model"
MODELS = (PLAIN_MLP, SHIPPED_MODEL)
SHIPPED_WIDTH = ModelConfig().width
# The fields a model's line names: its architecture. The feature count comes from the data, and the scoring bias
# follows the loss (ranker.training.session.model_config_for).
_NAMED_FIELDS = tuple(field.name for field in dataclasses.fields(ModelConfig)
                      if field.name not in ("num_features", "width", "output_bias"))


def benchmark_model(name: str, width: int, num_features: int = 0) -> ModelConfig:
    """The configuration `name` stands for, `width` units wide."""
    if name == PLAIN_MLP:
        return ModelConfig(num_features=num_features, width=width, norm="none", dropout=0.0, encoding="none",
                           embedding_width=0)
    if name == SHIPPED_MODEL:
        return ModelConfig(num_features=num_features, width=width)
    raise ValueError(f"model: {name!r} is not a benchmark model; use one of {', '.join(MODELS)}")


def describe(name: str) -> str:
    """`plain MLP (num_layers=7, dropout=0.0, ...)`: the name and every architecture field, widths apart."""
    config = benchmark_model(name, SHIPPED_WIDTH)
    return f"{name} ({', '.join(f'{field}={getattr(config, field)!r}' for field in _NAMED_FIELDS)})"


def model_line(names: list[str]) -> str:
    """The provenance line naming the models a table ran (widths are in the table)."""
    return "- Models: " + "; ".join(describe(name) for name in names)


def training_flops_per_sample(config: ModelConfig, num_features: int) -> int:
    """Training FLOPs per document (forward 2 per multiply-add, backward twice the forward) of the dense layers and,
    where the model has them, the per-feature embeddings; the encoding and norms are elementwise and not counted."""
    bins = config.bins if config.encoding == "piecewise" else 1
    macs = 0
    if config.embedding_width:
        width = config.embedding_width
        macs += num_features * (bins * width + (config.embedding_layers - 1) * width * width)
    first = num_features * (config.embedding_width or bins)
    sizes = [first] + [config.width] * (config.num_layers - 1) + [1]
    macs += sum(fan_in * fan_out for fan_in, fan_out in zip(sizes[:-1], sizes[1:]))
    return 3 * 2 * macs
