"""`Int8Linear`: ``x @ kernel + bias`` with int8 weights and dynamically quantised inputs."""

from __future__ import annotations

import tensorflow as tf

from albert_tf.layers.projection_inputs import as_matrix, kernel_and_bias, like_input

# The op that runs it: oneDNN's u8 × s8 → s32 inner product with the bias added and
# the result turned back into float32. It is a stock op, so a SavedModel using it
# needs no custom kernels, but its CPU kernel exists only in TensorFlow builds with
# oneDNN, such as the x86-64 pip wheels (docs/serving.md, "Precision"). Keras's own
# ``quantize("int8")`` lowers to an Eigen int32 matmul that is 2.8x *slower* than
# float32 here (bench/README.md, "Serving").
INT8_MATMUL_OP = "QuantizedMatMulWithBiasAndDequantize"
#: What an eager call says on a CPU where that op does not run (a served graph fails
#: earlier, naming the op).
INT8_UNSUPPORTED_MESSAGE = (
    "TensorFlow's int8 matmul does not run on this CPU (it needs AVX-512 or "
    "AVX-VNNI-INT8): serve this model's float32 or bfloat16 export here"
)


class Int8Linear(tf.Module):
    """A dense projection served in 8 bits: ``x [..., K] → x @ kernel + bias [..., N]``.

    The kernel is stored as int8, symmetric, with one scale per output column
    (``max|kernel[:, j]| / 127``). Each call quantises its input to uint8 over
    the range ``[min(x, 0), max(x, 0)]`` of the whole tensor (dynamic, as ONNX
    Runtime's ``quantize_dynamic`` does), multiplies in integers and returns
    float32. Shifting the input by its minimum makes it non-negative, as the
    op's unsigned input requires; the shift comes back as ``min · Σ_k kernel[k, :]``,
    folded into the bias. The per-column scales are applied to the float
    output, since the op takes one weight scale.

    Args:
        kernel: float [K, N].
        bias: float [N] (zeros when None).

    Example:
        >>> import numpy as np
        >>> rng = np.random.RandomState(0)
        >>> w, b = rng.randn(8, 4).astype("float32"), rng.randn(4).astype("float32")
        >>> x = rng.randn(3, 8).astype("float32")
        >>> try:
        ...     y = Int8Linear(w, b)(tf.constant(x)).numpy()
        ...     ok = bool(np.abs(y - (x @ w + b)).max() < 0.05 * np.abs(x @ w + b).max())
        ... except tf.errors.InvalidArgumentError as e:  # no AVX-512 / AVX-VNNI-INT8 here
        ...     ok = "does not run on this CPU" in e.message
        >>> ok
        True
    """

    def __init__(self, kernel, bias=None, name: str | None = None):
        super().__init__(name=name)
        kernel, bias = kernel_and_bias(kernel, bias, "Int8Linear")
        # Per column: a column of small weights keeps its resolution.
        scale = tf.maximum(tf.reduce_max(tf.abs(kernel), axis=0), 1e-12) / 127.0
        quantized = tf.cast(tf.clip_by_value(tf.round(kernel / scale), -127, 127), tf.int8)
        self.kernel = tf.Variable(quantized, trainable=False, name="kernel")
        self.scale = tf.Variable(scale, trainable=False, name="scale")
        # Σ_k of the *dequantised* kernel: the exact correction for the input shift.
        self.column_sums = tf.Variable(
            tf.reduce_sum(tf.cast(quantized, tf.float32), axis=0) * scale,
            trainable=False,
            name="column_sums",
        )
        self.bias = tf.Variable(bias, trainable=False, name="bias")

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.kernel.shape)

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        flat = as_matrix(x, self.shape[0], tf.float32)
        # One QuantizeV2 pass codes round((x - low) · 255 / (high - low)) in 0..255;
        # the op's own outputs give the range it used (it widens a near-empty one).
        quantized = tf.quantization.quantize(
            flat,
            tf.minimum(tf.reduce_min(flat), 0.0),
            tf.maximum(tf.reduce_max(flat), 0.0),
            tf.quint8,
            mode="MIN_FIRST",
            ensure_minimum_range=1e-6,
        )
        low = quantized.output_min
        span = quantized.output_max - low
        product = tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
            a=quantized.output,
            b=tf.bitcast(self.kernel, tf.qint8),
            bias=(self.bias + low * self.column_sums) / self.scale,
            min_a=0.0,
            max_a=span,
            min_b=-127.0,
            max_b=127.0,
            min_freezed_output=0.0,  # only read for 8-bit outputs
            max_freezed_output=0.0,
            Toutput=tf.float32,
            input_quant_mode="SCALED",
        )
        # On CPUs whose TensorFlow kernels take no int8 (no AVX-512 or AVX-VNNI-INT8:
        # albert_tf.hardware.ONEDNN_DTYPE_FLAGS), the op called eagerly returns an empty
        # tensor rather than failing: say why, instead of a shape error further on. In a
        # graph (a SavedModel's) the kernel sets no output and the runtime itself fails
        # with "Missing 0-th output from {{node QuantizedMatMulWithBiasAndDequantize}}",
        # so the served graph carries no check.
        if tf.executing_eagerly() and product.shape.num_elements() != (
            flat.shape[0] * self.shape[1]
        ):
            raise tf.errors.InvalidArgumentError(None, None, INT8_UNSUPPORTED_MESSAGE)
        return like_input(product * self.scale, x)
