"""The model's fitted input encoding, its per-feature embedding and the ranking losses, against values worked out by
hand."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch
from ranker.config import ModelConfig, TrainConfig, allowed_of
from ranker.model import export
from ranker.model.embedding import FeatureEmbedding
from ranker.model.encoding import PiecewiseLinearEncoding, column_quantiles
from ranker.model.losses import LOSSES, SHIFT_INVARIANT_LOSSES, graded_listwise_loss, pairwise_logistic_loss
from ranker.model.mlp import RankingMLP


def test_each_feature_becomes_its_position_across_bins_between_its_own_training_quantiles():
    # Given a column 0..4 (quantile edges 0, 1, 2, 3, 4 for 4 bins), a flag column and a constant column
    rows = np.array([[value, value % 2, 7.0] for value in range(5)], np.float32)
    encoding = PiecewiseLinearEncoding(num_features=3, bins=4).fit(rows)
    # When values inside, below and above the training range are encoded
    encoded = encoding(torch.tensor([[2.5, 1.0, 7.0], [-3.0, 0.0, 9.0], [40.0, 0.5, 7.0]])).view(3, 3, 4)
    # Then the counted feature is 1 for each bin below it, its share of the bin it is in, 0 above; clamped outside
    torch.testing.assert_close(encoded[:, 0], torch.tensor([[1, 1, 0.5, 0], [0, 0, 0, 0], [1, 1, 1, 1.0]]))
    # And the flag has one bin (0 to 1) holding its value; the constant feature encodes to nothing
    torch.testing.assert_close(encoded[:, 1], torch.tensor([[1, 0, 0, 0], [0, 0, 0, 0], [0.5, 0, 0, 0]]))
    assert encoded[:, 2].abs().sum() == 0


@pytest.mark.parametrize("rows", [1, 2, 7, 33, 1000])
@pytest.mark.parametrize("bins", [1, 4, 32])
def test_the_bin_edges_are_numpys_quantiles_to_the_last_bit(rows, bins):
    # Given float32 columns with ties (4 decimals, as LETOR text holds them), a flag and a constant, and the levels
    # the encoding takes
    generator = np.random.default_rng(rows * 100 + bins)
    columns = np.round(generator.gamma(0.5, 2.0, size=(rows, 6)), 4).astype(np.float32)
    columns[:, 1] = columns[:, 1] > 1
    columns[:, 2] = 3.25
    columns[:, 3] = -columns[:, 3]
    levels = np.linspace(0, 1, bins + 1)
    # When the encoding's quantiles are taken on several threads
    quantiles = column_quantiles(columns, levels, threads=3)
    # Then they are numpy's float64 quantiles exactly (the edges a model was fitted with before)
    np.testing.assert_array_equal(quantiles, np.quantile(columns.astype(np.float64), levels, axis=0))


def test_the_fitted_edges_are_state_of_the_model_and_load_into_a_fresh_one():
    # Given a model whose encoding was fitted on heavy-tailed rows
    rows = np.random.default_rng(0).lognormal(0, 2, (500, 4)).astype(np.float32)
    config = ModelConfig(num_features=4, width=8, num_layers=2, bins=8)
    fitted = RankingMLP(config)
    fitted.encoding.fit(rows)
    # When its state dict is loaded into a model built from the same config
    fresh = RankingMLP(config)
    fresh.load_state_dict(fitted.state_dict())
    # Then the fresh model scores exactly as the fitted one (the edges travelled with the weights)
    batch = torch.from_numpy(rows[:10])
    torch.testing.assert_close(fresh.eval()(batch), fitted.eval()(batch))
    assert {"encoding.lower_edges", "encoding.inverse_widths"} <= fitted.state_dict().keys()


def test_fitting_on_rows_of_another_width_names_the_shape_and_the_fix():
    with pytest.raises(ValueError, match=r"features: shape \(3, 5\) does not match this encoding's 4 features"):
        PiecewiseLinearEncoding(num_features=4, bins=2).fit(np.zeros((3, 5), np.float32))


def test_each_feature_is_embedded_by_layers_of_its_own_that_see_only_its_encoded_values():
    # Given an embedding of 2 features, 3 encoded values each, through 2 layers of 2 units each, weights set by hand
    embedding = FeatureEmbedding(num_features=2, inputs_per_feature=3, width=2, layers=2)
    first, second = embedding.layers[0], embedding.layers[2]
    with torch.no_grad():
        first.weight.copy_(torch.tensor([[[1.0, -1.0], [2.0, 0.0], [0.0, 1.0]],
                                         [[0.5, 0.0], [0.0, 0.5], [-1.0, -1.0]]]))
        first.bias.copy_(torch.tensor([[0.0, 0.5], [1.0, -3.0]]))
        second.weight.copy_(torch.tensor([[[1.0, 0.0], [1.0, -1.0]], [[-1.0, 2.0], [0.0, 1.0]]]))
        second.bias.copy_(torch.tensor([[0.0, 0.0], [0.5, 0.0]]))
    # When a row encoded as feature 0 = (1, 0.5, 0), feature 1 = (1, 1, 0.25) is embedded
    embedded = embedding(torch.tensor([[1.0, 0.5, 0.0, 1.0, 1.0, 0.25]]))
    # Then the first layer gives feature 0 relu(1 + 1, -1 + 0.5) = (2, 0) and feature 1 relu(0.5 - 0.25 + 1,
    # 0.5 - 0.25 - 3) = (1.25, 0); the second relu(2 + 0, -0) = (2, 0) and relu(-1.25 + 0.5, 2.5) = (0, 2.5)
    torch.testing.assert_close(embedded, torch.tensor([[2.0, 0.0, 0.0, 2.5]]))
    # And changing one feature's values changes its own units only
    moved = embedding(torch.tensor([[1.0, 0.5, 0.0, 0.0, 0.0, 0.0]]))
    torch.testing.assert_close(moved[:, :2], embedded[:, :2])
    assert not torch.equal(moved[:, 2:], embedded[:, 2:])


def test_the_first_dense_layer_takes_the_embeddings_or_without_them_the_encoding():
    embedded = RankingMLP(ModelConfig(num_features=5, width=8, num_layers=3, bins=4, embedding_width=6))
    assert embedded.layers[0].in_features == 5 * 6
    plain = RankingMLP(ModelConfig(num_features=5, width=8, num_layers=3, bins=4, embedding_width=0))
    assert plain.layers[0].in_features == 5 * 4
    raw = RankingMLP(ModelConfig(num_features=5, width=8, num_layers=3, encoding="none", embedding_width=6))
    assert raw.embedding.inputs_per_feature == 1 and raw.layers[0].in_features == 5 * 6
    with pytest.raises(ValueError, match="embedding_width: -1 is not a unit count"):
        FeatureEmbedding(num_features=5, inputs_per_feature=4, width=-1, layers=2)
    with pytest.raises(ValueError, match="embedding_layers: 0 is not a layer count"):
        FeatureEmbedding(num_features=5, inputs_per_feature=4, width=3, layers=0)


def test_a_saved_model_whose_config_names_no_embedding_width_loads_as_a_model_without_embeddings(tmp_path):
    # Given a model folder saved by a ranker without per-feature embeddings (its config has no embedding_width)
    rows = np.random.default_rng(1).lognormal(0, 2, (50, 4)).astype(np.float32)
    config = ModelConfig(num_features=4, width=8, num_layers=2, bins=4, embedding_width=0)
    model = RankingMLP(config).eval()
    model.encoding.fit(rows)
    export.save_model(tmp_path, model, config, log1p=False, metrics={})
    settings = json.loads((tmp_path / export.CONFIG).read_text())
    del settings["embedding_width"]
    (tmp_path / export.CONFIG).write_text(json.dumps(settings))
    # When it is loaded, then it scores as the model did
    batch = torch.from_numpy(rows)
    torch.testing.assert_close(export.load_scorer(tmp_path)(batch), model(batch))


def test_graded_listwise_loss_is_the_cross_entropy_against_normalised_gains_and_skips_queries_without_any():
    # Given a query with labels 2, 0, 1 (gains 3, 0, 1: target 3/4, 0, 1/4) and one with no relevant document
    scores = torch.tensor([[1.0, 0.0, -1.0, 5.0], [0.3, 0.1, 0.2, 0.0]])
    labels = torch.tensor([[2.0, 0.0, 1.0, 4.0], [0.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, True, False], [True, True, True, False]])
    # When the loss is computed (the padded slot of the first query holds a high label and score: it must not count)
    loss = graded_listwise_loss(scores, labels, mask)
    # Then it is -(3/4 log p(1) + 1/4 log p(3)) with p the softmax of the real scores 1, 0, -1, over one query
    log_normaliser = math.log(math.exp(1) + math.exp(0) + math.exp(-1))
    expected = -(0.75 * (1 - log_normaliser) + 0.25 * (-1 - log_normaliser))
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_pairwise_loss_averages_the_logistic_loss_of_every_differently_labelled_pair_and_ignores_padding():
    # Given a query with labels 2, 0, 1 (pairs 1>2, 1>3, 3>2), one whose documents all share a label (no pair), and
    # a padded slot holding a high label and score
    scores = torch.tensor([[1.0, 0.0, -1.0, 5.0], [0.3, 0.1, 0.2, 0.0]])
    labels = torch.tensor([[2.0, 0.0, 1.0, 4.0], [1.0, 1.0, 1.0, 0.0]])
    mask = torch.tensor([[True, True, True, False], [True, True, True, False]])
    # When the loss is computed
    loss = pairwise_logistic_loss(scores, labels, mask)
    # Then it is the mean of log(1 + exp(-(s_better - s_worse))) over the three ordered pairs of the first query
    margins = [1.0 - 0.0, 1.0 - -1.0, -1.0 - 0.0]
    expected = sum(math.log1p(math.exp(-margin)) for margin in margins) / 3
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_pairwise_loss_is_blind_to_a_shift_of_a_querys_scores_and_falls_as_the_order_comes_right():
    labels = torch.tensor([[3.0, 1.0, 0.0]])
    mask = torch.ones(1, 3, dtype=torch.bool)
    right, wrong = torch.tensor([[2.0, 1.0, 0.0]]), torch.tensor([[0.0, 1.0, 2.0]])
    assert pairwise_logistic_loss(right + 7, labels, mask).item() == pytest.approx(
        pairwise_logistic_loss(right, labels, mask).item(), rel=1e-6)
    assert pairwise_logistic_loss(right, labels, mask) < pairwise_logistic_loss(wrong, labels, mask)


def test_the_loss_flag_offers_exactly_the_losses_the_trainers_can_run():
    # ranker.config stays stdlib-only (the trigger Lambda imports it), so it names the losses itself: the two lists
    # must not drift apart, or a refused flag value would be a loss that exists (or an accepted one a KeyError)
    loss_field = next(field for field in dataclasses.fields(TrainConfig) if field.name == "loss")
    assert set(allowed_of(loss_field).choices) == set(LOSSES)
    assert TrainConfig().loss in LOSSES
    assert SHIFT_INVARIANT_LOSSES <= set(LOSSES)
