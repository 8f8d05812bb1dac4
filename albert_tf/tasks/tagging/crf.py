"""`ConditionalRandomField`: learned tag-to-tag scores over a tagger's logits.

A linear-chain CRF (Lafferty et al. 2001) as NER taggers put it on top of
BERT/ALBERT: the score of a tag sequence is the sum of its tags' logits, its
first tag's start score, each consecutive pair's transition score and its last
tag's end score. Training maximises the gold sequence's log-probability
(`ConditionalRandomField.log_likelihood`, the forward algorithm); decoding takes
the best-scoring sequence (`ConditionalRandomField.decode`, Viterbi); each
position's posterior over its tags is `ConditionalRandomField.marginals`
(forward-backward), what entity scores read.

Only the positions a mask marks take part: a word's first piece, not its other
pieces, [CLS], [SEP] or padding. The chain links each marked position to the
next marked one, so a word split into several pieces is one step.
"""

from __future__ import annotations

import keras
import tensorflow as tf


def _compact(values: tf.Tensor, mask: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Moves each row's marked positions to its front, in order: the values so
    gathered ([batch, seq + 2, ...]: two unmarked steps appended, so that the
    chain's loops have a step even for zero-length input), each row's count of
    marked positions and the gather order."""
    mask = tf.pad(mask, [[0, 0], [0, 2]])
    values = tf.pad(values, [[0, 0], [0, 2]] + [[0, 0]] * (len(values.shape) - 2))
    order = tf.argsort(tf.cast(tf.logical_not(mask), tf.int32), axis=1, stable=True)
    lengths = tf.reduce_sum(tf.cast(mask, tf.int32), 1)
    return tf.gather(values, order, batch_dims=1), lengths, order


@keras.saving.register_keras_serializable(package="albert_tf")
class ConditionalRandomField(keras.layers.Layer):
    """The CRF's scores: ``transitions`` [from, to], ``start`` and ``end`` [tags].

    All start at zero: an untrained CRF decodes as a per-position argmax does.
    The layer has no forward pass of its own (the tagger's output stays its
    logits); the trainer asks for `log_likelihood`, decoding for `decode` and
    `marginals`.

    Args:
        num_tags: the tagger's number of tags.

    Example:
        >>> import numpy as np
        >>> crf = ConditionalRandomField(3)
        >>> crf.build()
        >>> logits = np.array([[[2.0, 0, 0], [0, 0, 1], [0, 3, 0]]], "float32")
        >>> crf.decode(logits, np.array([[True, False, True]])).numpy().tolist()
        [[0, -1, 1]]
    """

    def __init__(self, num_tags: int, **kwargs):
        super().__init__(**kwargs)
        if num_tags < 2:
            raise ValueError(f"num_tags must be >= 2, got {num_tags}")
        self.num_tags = num_tags

    def build(self, input_shape=None):
        # float32 whatever the policy: scores are summed along the whole sequence.
        def weight(name, shape):
            return self.add_weight(name=name, shape=shape, initializer="zeros", dtype="float32")

        self.transitions = weight("transitions", (self.num_tags, self.num_tags))
        self.start = weight("start", (self.num_tags,))
        self.end = weight("end", (self.num_tags,))
        self.built = True

    def log_likelihood(self, logits, tags, mask) -> tf.Tensor:
        """float32 [batch]: log p(tags | logits) of each sequence over its marked
        positions (0 for a sequence with none).

        Args:
            logits: [batch, seq, tags] scores of each tag at each position.
            tags: int [batch, seq] gold tags (any value where unmarked).
            mask: bool [batch, seq], the positions in the chain.
        """
        mask = tf.cast(mask, tf.bool)
        logits, lengths, order = _compact(tf.cast(logits, tf.float32), mask)
        tags = tf.pad(tf.where(mask, tf.cast(tags, tf.int32), 0), [[0, 0], [0, 2]])
        tags = tf.gather(tags, order, batch_dims=1)
        steps = tf.shape(logits)[1]
        inside = tf.sequence_mask(lengths, steps)
        last = tf.maximum(lengths - 1, 0)
        any_step = lengths > 0

        # The gold sequence's score.
        emitted = tf.gather(logits, tags, batch_dims=2)
        pairs = tf.gather_nd(self.transitions, tf.stack([tags[:, :-1], tags[:, 1:]], -1))
        last_tag = tf.gather(tags, last, batch_dims=1)
        gold = (
            tf.reduce_sum(tf.where(inside, emitted, 0.0), 1)
            + tf.reduce_sum(tf.where(inside[:, 1:], pairs, 0.0), 1)
            + tf.gather(self.start, tags[:, 0])
            + tf.gather(self.end, last_tag)
        )

        # log Σ over all sequences of exp(score): the forward algorithm.
        def step(alpha, inputs):
            emit, live = inputs
            moved = tf.reduce_logsumexp(alpha[:, :, None] + self.transitions, 1) + emit
            return tf.where(live[:, None], moved, alpha)

        rest = (tf.transpose(logits[:, 1:], [1, 0, 2]), tf.transpose(inside[:, 1:]))
        alpha = tf.foldl(step, rest, initializer=self.start + logits[:, 0])
        log_z = tf.reduce_logsumexp(alpha + self.end, 1)
        return tf.where(any_step, gold - log_z, 0.0)

    def decode(self, logits, mask) -> tf.Tensor:
        """int32 [batch, seq]: the best tag sequence over the marked positions
        (Viterbi), −1 where unmarked.

        The logits may be log-probabilities instead: a position's constant
        shift changes no sequence's rank.
        """
        mask = tf.cast(mask, tf.bool)
        logits, lengths, order = _compact(tf.cast(logits, tf.float32), mask)
        inside = tf.sequence_mask(lengths, tf.shape(logits)[1])
        identity = tf.broadcast_to(tf.range(self.num_tags), [tf.shape(logits)[0], self.num_tags])

        def step(carry, inputs):
            best, _ = carry
            emit, live = inputs
            scores = best[:, :, None] + self.transitions  # [batch, from, to]
            came_from = tf.argmax(scores, 1, output_type=tf.int32)
            moved = tf.reduce_max(scores, 1) + emit
            # Past a sequence's end: its best scores stay, and the way back is itself.
            live = live[:, None]
            return tf.where(live, moved, best), tf.where(live, came_from, identity)

        rest = (tf.transpose(logits[:, 1:], [1, 0, 2]), tf.transpose(inside[:, 1:]))
        best, back = tf.scan(step, rest, initializer=(self.start + logits[:, 0], identity))
        tag = tf.argmax(best[-1] + self.end, 1, output_type=tf.int32)

        def step_back(tag, came_from):
            return tf.gather(came_from, tag, batch_dims=1)

        earlier = tf.scan(step_back, back, initializer=tag, reverse=True)  # [steps - 1, batch]
        path = tf.transpose(tf.concat([earlier, tag[None]], 0))  # [batch, steps]
        # Back from the front-packed chain to the original positions.
        restore = tf.argsort(order, axis=1, stable=True)[:, :-2]
        return tf.where(mask, tf.gather(path, restore, batch_dims=1), -1)

    def marginals(self, logits, mask) -> tf.Tensor:
        """float32 [batch, seq, tags]: p(tag at a position = k | the whole sequence)
        under the chain (forward-backward in log space); each marked position's row
        sums to 1, unmarked positions' rows are 0.

        Like `decode`, the logits may be log-probabilities: a position's constant
        shift cancels in the normalisation.

        Example:
            >>> import numpy as np
            >>> crf = ConditionalRandomField(2)
            >>> crf.build()
            >>> _ = crf.transitions.assign([[-30.0, 0.0], [0.0, 0.0]])  # no 0 after 0
            >>> logits = np.log(np.array([[[0.9, 0.1], [0.5, 0.5], [0.5, 0.5]]], "float32"))
            >>> p = crf.marginals(logits, np.array([[True, True, False]]))
            >>> p.numpy().astype("float64").round(3).tolist()
            [[[0.818, 0.182], [0.091, 0.909], [0.0, 0.0]]]
        """
        return self._forward_backward(logits, mask)[0]

    def log_partition(self, logits, mask) -> tf.Tensor:
        """float32 [batch]: log Σ over every tag sequence of exp(its score), over the
        marked positions (0 for a sequence with none): by the forward pass of
        `marginals`, a separate computation from `log_likelihood`'s."""
        return self._forward_backward(logits, mask)[1]

    def _forward_backward(self, logits, mask) -> tuple[tf.Tensor, tf.Tensor]:
        mask = tf.cast(mask, tf.bool)
        logits, lengths, order = _compact(tf.cast(logits, tf.float32), mask)
        inside = tf.sequence_mask(lengths, tf.shape(logits)[1])
        # As tensors: a Keras variable on the left of + drops a broadcast size-1 axis.
        transitions, start, end_scores = (
            tf.convert_to_tensor(v) for v in (self.transitions, self.start, self.end)
        )
        emits = tf.transpose(logits, [1, 0, 2])  # [steps, batch, tags]
        later = tf.transpose(inside[:, 1:])  # [steps - 1, batch]: whether a step follows

        # alpha[t, k]: log Σ over tags up to t, ending in k, of their scores.
        def forward(alpha, inputs):
            emit, live = inputs
            moved = tf.reduce_logsumexp(alpha[:, :, None] + transitions, 1) + emit
            return tf.where(live[:, None], moved, alpha)  # past the end: held

        first = start + emits[0]
        alphas = tf.concat([first[None], tf.scan(forward, (emits[1:], later), first)], 0)
        log_z = tf.reduce_logsumexp(alphas[-1] + end_scores, 1)

        # beta[t, k]: log Σ over tags after t, given k at t, of their scores; the
        # last marked step's (and any later one's) is the end score.
        end = tf.broadcast_to(end_scores, tf.shape(first))

        def backward(beta, inputs):
            emit, live = inputs  # step t + 1's logits, and whether it is in the chain
            moved = tf.reduce_logsumexp(transitions + (emit + beta)[:, None, :], 2)
            return tf.where(live[:, None], moved, end)

        betas = tf.scan(backward, (emits[1:], later), end, reverse=True)
        betas = tf.concat([betas, end[None]], 0)
        posterior = tf.exp(tf.minimum(alphas + betas - log_z[None, :, None], 0.0))
        posterior = tf.transpose(posterior, [1, 0, 2])  # [batch, steps, tags]
        restore = tf.argsort(order, axis=1, stable=True)[:, :-2]
        posterior = tf.gather(posterior, restore, batch_dims=1)
        return tf.where(mask[:, :, None], posterior, 0.0), tf.where(lengths > 0, log_z, 0.0)

    def get_config(self):
        return super().get_config() | {"num_tags": self.num_tags}
