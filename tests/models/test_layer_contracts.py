"""Every public layer and model under the contract of `helpers.testing_utils.run_layer_test`:
config round trip, symbolic call, two sequence lengths, `.keras` save/load and
mixed_bfloat16 all the way down. Plus the tie of the MLM decoder after loading."""

from __future__ import annotations

import keras
import keras_hub
import numpy as np
import pytest
from helpers.testing_utils import random_batch, run_layer_test, tiny_config

from albert_tf.activations import gelu_new
from albert_tf.config import SHARE_MODES
from albert_tf.heads.masked_lm_head import MaskedLMHead
from albert_tf.heads.pooled_classifier_head import PooledClassifierHead
from albert_tf.heads.sentence_order_head import SentenceOrderHead
from albert_tf.layers.attention import AlbertAttention
from albert_tf.layers.encoder import AlbertEncoder
from albert_tf.layers.factorized_embedding import FactorizedEmbedding
from albert_tf.layers.transformer_layer import AlbertTransformerLayer
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.models.pretraining_model import AlbertPretrainingModel
from albert_tf.tasks.classification.model import AlbertTextClassifier
from albert_tf.tasks.multiple_choice.head import MultipleChoiceHead
from albert_tf.tasks.multiple_choice.model import AlbertMultipleChoice
from albert_tf.tasks.span_qa.head import SpanHead
from albert_tf.tasks.span_qa.model import AlbertSpanQA
from albert_tf.tasks.tagging.head import TokenClassifierHead
from albert_tf.tasks.tagging.model import AlbertTokenClassifier

CONFIG = tiny_config()  # V=120, E=16, H=48, 4 layers, 4 heads, FFN 96
V, E, H = CONFIG.vocab_size, CONFIG.embedding_size, CONFIG.hidden_size
BATCH = 3
PREDICTIONS = 4  # masked positions per row


def _hidden(seq: int) -> np.ndarray:
    return np.random.RandomState(seq).randn(BATCH, seq, H).astype("float32")


def _ids(seq: int) -> dict[str, np.ndarray]:
    return random_batch(V, batch=BATCH, seq=seq)


def _sequence_shape(seq: int) -> tuple[int, int, int]:
    return (BATCH, seq, H)


@pytest.mark.parametrize("layout", ["albert", "brightmart"])
def test_factorized_embedding(tmp_path, layout):
    layer = run_layer_test(
        FactorizedEmbedding,
        dict(
            vocab_size=V,
            embedding_size=E,
            hidden_size=H,
            max_position_embeddings=CONFIG.max_position_embeddings,
            type_vocab_size=CONFIG.type_vocab_size,
            layer_norm_eps=1e-6,
            dropout=0.1,
            initializer_range=0.03,
            layout=layout,
        ),
        lambda seq: (_ids(seq)["token_ids"], _ids(seq)["segment_ids"]),
        _sequence_shape,
        tmp_path,
        mixed_output_dtypes="bfloat16",
    )
    # brightmart's: positions and segments at width H, a projection without bias.
    width = H if layout == "brightmart" else E
    assert layer.position_embedding.position_embeddings.shape == (
        CONFIG.max_position_embeddings,
        width,
    )
    assert (layer.projection.bias is None) == (layout == "brightmart")


def test_attention(tmp_path):
    run_layer_test(
        AlbertAttention,
        dict(num_heads=4, key_dim=H // 4, dropout=0.1),
        lambda seq: (_hidden(seq), _hidden(seq)),
        _sequence_shape,
        tmp_path,
        mixed_output_dtypes="bfloat16",
    )


def test_transformer_layer(tmp_path):
    run_layer_test(
        AlbertTransformerLayer,
        dict(
            intermediate_dim=96,
            num_heads=4,
            dropout=0.1,
            attention_dropout=0.05,
            activation=gelu_new,
            layer_norm_epsilon=1e-6,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.03),
        ),
        lambda seq: (_hidden(seq), _ids(seq)["padding_mask"]),
        _sequence_shape,
        tmp_path,
        mixed_output_dtypes="bfloat16",
    )


@pytest.mark.parametrize("share", SHARE_MODES)
def test_encoder_in_every_share_mode(share, tmp_path):
    encoder = run_layer_test(
        AlbertEncoder,
        dict(
            num_layers=4,
            num_groups=2,
            inner_group_num=1,
            share=share,
            num_heads=4,
            intermediate_size=96,
            activation=gelu_new,
            dropout=0.0,
            attention_dropout=0.05,
            layer_norm_eps=1e-6,
            initializer_range=0.03,
        ),
        lambda seq: (_hidden(seq), _ids(seq)["padding_mask"]),
        _sequence_shape,
        tmp_path,
        mixed_output_dtypes="bfloat16",
    )
    # The restored encoder re-creates the sharing, not just the shapes: the
    # number of distinct blocks per mode (2 groups of 2 layers).
    restored = AlbertEncoder.from_config(encoder.get_config())
    restored.build((None, None, H))
    layers = restored.transformer_layers
    blocks = (
        len({id(layer._self_attention_layer) for layer in layers}),
        len({id(layer._feedforward_intermediate_dense) for layer in layers}),
    )
    expected = {"all": (2, 2), "attention": (2, 4), "ffn": (4, 2), "none": (4, 4)}
    assert blocks == expected[share]


def _owned_embedding_config() -> dict:
    # A head restored alone owns its embedding; the harness builds it that way.
    return keras.layers.serialize(
        keras_hub.layers.ReversibleEmbedding(V, E, name="token_embedding")
    )


@pytest.mark.parametrize("at_positions", [True, False], ids=["positions", "every_token"])
def test_masked_lm_head(at_positions, tmp_path):
    def args(seq):
        if not at_positions:
            return (_hidden(seq),)
        positions = np.random.RandomState(seq).randint(0, seq, (BATCH, PREDICTIONS))
        return (_hidden(seq), positions.astype("int32"))

    run_layer_test(
        MaskedLMHead,
        dict(
            token_embedding=_owned_embedding_config(),
            activation="relu",
            layer_norm_eps=1e-6,
            initializer_range=0.03,
        ),
        args,
        lambda seq: (BATCH, PREDICTIONS if at_positions else seq, V),
        tmp_path,
        mixed_output_dtypes="float32",  # logits leave the head in float32
    )


def test_pooled_classifier_head(tmp_path):
    run_layer_test(
        PooledClassifierHead,
        dict(units=5, dropout=0.1, initializer_range=0.03),
        lambda n: (np.random.RandomState(n).randn(n, H).astype("float32"),),
        lambda n: (n, 5),
        tmp_path,
        mixed_output_dtypes="float32",
    )


def test_sentence_order_head(tmp_path):
    # A pooled head has no sequence axis; the varying length is the batch.
    run_layer_test(
        SentenceOrderHead,
        dict(dropout=0.1, initializer_range=0.03),
        lambda n: (np.random.RandomState(n).randn(n, H).astype("float32"),),
        lambda n: (n, 2),
        tmp_path,
        mixed_output_dtypes="float32",
    )


def test_multiple_choice_head(tmp_path):
    # The varying length is the number of options: n // 3 of them.
    def args(n):
        choices = n // 3
        pooled = np.random.RandomState(n).randn(BATCH * choices, H).astype("float32")
        mask = np.ones((BATCH, choices), "int32")
        mask[0, -1] = 0
        return (pooled, mask)

    run_layer_test(
        MultipleChoiceHead,
        dict(dropout=0.1, initializer_range=0.03),
        args,
        lambda n: (BATCH, n // 3),
        tmp_path,
        mixed_output_dtypes="float32",
    )


def test_token_classifier_head(tmp_path):
    run_layer_test(
        TokenClassifierHead,
        dict(num_tags=5, dropout=0.1, initializer_range=0.03),
        lambda seq: (np.random.RandomState(seq).randn(BATCH, seq, H).astype("float32"),),
        lambda seq: (BATCH, seq, 5),
        tmp_path,
        mixed_output_dtypes="float32",
    )


def test_span_head(tmp_path):
    run_layer_test(
        SpanHead,
        dict(initializer_range=0.03),
        lambda seq: (np.random.RandomState(seq).randn(BATCH, seq, H).astype("float32"),),
        lambda seq: (BATCH, seq, 2),
        tmp_path,
        mixed_output_dtypes="float32",
    )


@pytest.mark.parametrize("hidden_states", [False, True], ids=["outputs", "hidden_states"])
def test_backbone(hidden_states, tmp_path):
    def expected(seq):
        shapes = {"sequence_output": (BATCH, seq, H), "pooled_output": (BATCH, H)}
        if hidden_states:
            shapes["hidden_states"] = [(BATCH, seq, H)] * (CONFIG.num_hidden_layers + 1)
        return shapes

    backbone = run_layer_test(
        AlbertBackbone,
        dict(
            config=tiny_config(share="attention", hidden_dropout_prob=0.1),
            output_hidden_states=hidden_states,
        ),
        lambda seq: (_ids(seq),),
        expected,
        tmp_path,
        mixed_output_dtypes={
            name: ["bfloat16"] * len(shape) if name == "hidden_states" else "bfloat16"
            for name, shape in expected(1).items()
        },
    )
    assert backbone.config.share == "attention"


def test_pretraining_model(tmp_path):
    def args(seq):
        batch = _ids(seq)
        batch["mask_positions"] = np.tile(np.arange(PREDICTIONS, dtype="int32"), (BATCH, 1))
        return (batch,)

    run_layer_test(
        AlbertPretrainingModel,
        dict(backbone=AlbertBackbone(CONFIG)),
        args,
        lambda seq: {
            "sequence_output": (BATCH, seq, H),
            "pooled_output": (BATCH, H),
            "mlm_logits": (BATCH, PREDICTIONS, V),
            "sop_logits": (BATCH, 2),
        },
        tmp_path,
        mixed_output_dtypes={
            "sequence_output": "bfloat16",
            "pooled_output": "bfloat16",
            "mlm_logits": "float32",
            "sop_logits": "float32",
        },
    )


def test_multiple_choice_model(tmp_path):
    def args(seq):
        flat = random_batch(V, batch=2 * 3, seq=seq)
        batch = {k: v.reshape(2, 3, seq) for k, v in flat.items()}
        batch["padding_mask"][1, 2] = 0  # item 1 has two options
        return (batch,)

    model = run_layer_test(
        AlbertMultipleChoice,
        dict(backbone=AlbertBackbone(CONFIG)),
        args,
        lambda seq: (2, 3),
        tmp_path,
        mixed_output_dtypes="float32",
    )
    assert model(*args(7))[1, 2] == -1e9


@pytest.mark.parametrize("num_labels", [3, 1])
def test_text_classifier_model(num_labels, tmp_path):
    model = run_layer_test(
        AlbertTextClassifier,
        dict(backbone=AlbertBackbone(CONFIG), num_labels=num_labels),
        lambda seq: (random_batch(V, batch=2, seq=seq),),
        lambda seq: (2, num_labels),
        tmp_path,
        mixed_output_dtypes="float32",
    )
    assert model.get_config()["num_labels"] == num_labels


def test_token_classifier_model(tmp_path):
    model = run_layer_test(
        AlbertTokenClassifier,
        dict(backbone=AlbertBackbone(CONFIG), num_tags=7),
        lambda seq: (random_batch(V, batch=2, seq=seq),),
        lambda seq: (2, seq, 7),
        tmp_path,
        mixed_output_dtypes="float32",
    )
    assert model.get_config()["num_tags"] == 7


def test_span_qa_model(tmp_path):
    run_layer_test(
        AlbertSpanQA,
        dict(backbone=AlbertBackbone(CONFIG)),
        lambda seq: (random_batch(V, batch=2, seq=seq),),
        lambda seq: (2, seq, 2),
        tmp_path,
        mixed_output_dtypes="float32",
    )


def test_loaded_pretraining_model_decodes_through_the_backbone_embedding(tmp_path):
    model = AlbertPretrainingModel.from_albert_config(CONFIG)
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    embedding = loaded.backbone.embeddings.token_embedding
    assert loaded.mlm_head.token_embedding is embedding
    # Not a copy: the head holds no V×E matrix of its own...
    assert (V, E) not in [tuple(w.shape) for w in loaded.mlm_head.weights]
    assert len(loaded.weights) == len(model.weights)
    # ...and decodes through the backbone's variable: zero it and the logits
    # are the output bias alone, at every position.
    embedding.embeddings.assign(np.zeros((V, E), "float32"))
    loaded.mlm_head.output_bias.assign(np.arange(V, dtype="float32"))
    logits = np.asarray(loaded(_ids(5))["mlm_logits"])
    np.testing.assert_array_equal(
        logits, np.broadcast_to(np.arange(V, dtype="float32"), logits.shape)
    )


def test_masked_lm_head_alone_owns_its_embedding():
    backbone = AlbertBackbone(CONFIG)
    tied = MaskedLMHead(
        backbone.token_embedding, activation="relu", layer_norm_eps=1e-6, initializer_range=0.02
    )
    tied(_hidden(5))
    assert tied.token_embedding is backbone.token_embedding
    assert (V, E) not in [tuple(w.shape) for w in tied.weights]

    alone = MaskedLMHead.from_config(tied.get_config())
    alone(_hidden(5))
    assert alone.token_embedding is not backbone.token_embedding
    assert [tuple(w.shape) for w in alone.weights].count((V, E)) == 1
    assert alone.get_config()["token_embedding"] == tied.get_config()["token_embedding"]
