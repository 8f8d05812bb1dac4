// Fused CPU kernels for the elementwise and layout work of an ALBERT training step.
//
// TensorFlow's executor runs every elementwise op as its own pass over memory:
// the tanh-GELU is ~8 ops forward and ~10 backward, a LayerNorm ~12 and ~15.
// On CPU those passes, not the FLOPs, are what they cost (bench/README.md).
// Each kernel here does its op in one pass (two for LayerNorm's backward),
// computing in float32 whatever the storage type, and rounding once. The
// attention's masked softmax and its head split/merge (transposes) likewise.
//
// Built on first use by albert_tf/kernels/build.py against the installed
// TensorFlow; the Python wrappers in albert_tf/kernels/__init__.py give them
// gradients and fall back to stock TensorFlow ops when they are unavailable.

#define EIGEN_USE_THREADS

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor.h"

namespace albert_tf {
namespace {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::TensorShapeUtils;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;
using CPUDevice = Eigen::ThreadPoolDevice;

// gelu_new(x) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

inline float ToFloat(float v) { return v; }
inline float ToFloat(Eigen::bfloat16 v) {
  const uint32_t bits = static_cast<uint32_t>(Eigen::numext::bit_cast<uint16_t>(v)) << 16;
  return Eigen::numext::bit_cast<float>(bits);
}
template <typename T>
inline T FromFloat(float v);
template <>
inline float FromFloat<float>(float v) {
  return v;
}
// Round to nearest even, as tf.cast, written branch-free so that loops of it
// vectorise (Eigen's scalar conversion does not).
template <>
inline Eigen::bfloat16 FromFloat<Eigen::bfloat16>(float v) {
  const uint32_t bits = Eigen::numext::bit_cast<uint32_t>(v);
  uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  rounded = (v != v) ? 0x7FC0u : rounded;  // NaN stays a quiet NaN
  return Eigen::numext::bit_cast<Eigen::bfloat16>(static_cast<uint16_t>(rounded));
}

// ---------------------------------------------------------------- GELU (tanh)

template <typename T>
class GeluTanhOp : public OpKernel {
 public:
  explicit GeluTanhOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x_in = ctx->input(0);
    Tensor* y_out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output({0}, 0, x_in.shape(), &y_out));
    const auto x = x_in.flat<T>().template cast<float>();
    const auto inner = x * (kSqrt2OverPi + (kSqrt2OverPi * kCubic) * x.square());
    y_out->flat<T>().device(ctx->eigen_device<CPUDevice>()) =
        (0.5f * x * (1.0f + inner.tanh())).template cast<T>();
  }
};

template <typename T>
class GeluTanhGradOp : public OpKernel {
 public:
  explicit GeluTanhGradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& dy_in = ctx->input(0);
    const Tensor& x_in = ctx->input(1);
    OP_REQUIRES(ctx, dy_in.shape() == x_in.shape(),
                ::tensorflow::errors::InvalidArgument(
                    "AlbertGeluTanhGrad: dy and x shapes differ: ", dy_in.shape().DebugString(),
                    " vs ", x_in.shape().DebugString()));
    Tensor* dx_out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output({0}, 0, x_in.shape(), &dx_out));
    const auto x = x_in.flat<T>().template cast<float>();
    const auto dy = dy_in.flat<T>().template cast<float>();
    const auto x2 = x.square();
    const auto t = (x * (kSqrt2OverPi + (kSqrt2OverPi * kCubic) * x2)).tanh();
    // d/dx = 0.5·(1 + t) + 0.5·x·(1 − t²)·√(2/π)·(1 + 3·0.044715·x²)
    const auto slope = kSqrt2OverPi + (3.0f * kSqrt2OverPi * kCubic) * x2;
    dx_out->flat<T>().device(ctx->eigen_device<CPUDevice>()) =
        (dy * (0.5f + 0.5f * t + 0.5f * x * (1.0f - t.square()) * slope)).template cast<T>();
  }
};

// ------------------------------------------------------------------ LayerNorm
//
// Over the last axis of a [rows, width] matrix, with float32 scale and offset
// whatever the storage type (Keras keeps LayerNorm weights in float32 under
// mixed precision). The forward also returns each row's mean and 1/σ for the
// backward, so it never recomputes the statistics.

// Rows per parallel task: the thread pool's cost model splits these further.
constexpr int64_t kRowCost = 64;

template <typename T>
class LayerNormOp : public OpKernel {
 public:
  explicit LayerNormOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("epsilon", &epsilon_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x_in = ctx->input(0);
    const Tensor& gamma_in = ctx->input(1);
    const Tensor& beta_in = ctx->input(2);
    OP_REQUIRES(ctx, TensorShapeUtils::IsMatrix(x_in.shape()),
                ::tensorflow::errors::InvalidArgument("AlbertLayerNorm: x must be [rows, width]"));
    const int64_t rows = x_in.dim_size(0), width = x_in.dim_size(1);
    OP_REQUIRES(ctx, gamma_in.NumElements() == width && beta_in.NumElements() == width,
                ::tensorflow::errors::InvalidArgument(
                    "AlbertLayerNorm: gamma and beta need ", width, " elements"));
    Tensor *y_out = nullptr, *mean_out = nullptr, *rstd_out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x_in.shape(), &y_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({rows}), &mean_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({rows}), &rstd_out));
    if (rows == 0) return;

    const T* x = x_in.flat<T>().data();
    const float* gamma = gamma_in.flat<float>().data();
    const float* beta = beta_in.flat<float>().data();
    T* y = y_out->flat<T>().data();
    float* mean = mean_out->flat<float>().data();
    float* rstd = rstd_out->flat<float>().data();
    const float epsilon = epsilon_;

    auto work = [&](int64_t begin, int64_t end) {
      std::vector<float> row(width);
      for (int64_t r = begin; r < end; ++r) {
        const T* xr = x + r * width;
        float sum = 0.0f;
        for (int64_t j = 0; j < width; ++j) {
          row[j] = ToFloat(xr[j]);
          sum += row[j];
        }
        const float mu = sum / width;
        // Two passes (mean, then squared deviations) as tf.nn.moments: no
        // cancellation when |mean| ≫ σ.
        float sq = 0.0f;
        for (int64_t j = 0; j < width; ++j) {
          const float d = row[j] - mu;
          sq += d * d;
        }
        const float inv = 1.0f / std::sqrt(sq / width + epsilon);
        T* yr = y + r * width;
        for (int64_t j = 0; j < width; ++j) {
          yr[j] = FromFloat<T>((row[j] - mu) * inv * gamma[j] + beta[j]);
        }
        mean[r] = mu;
        rstd[r] = inv;
      }
    };
    ctx->device()->tensorflow_cpu_worker_threads()->workers->ParallelFor(
        rows, kRowCost * width, work);
  }

 private:
  float epsilon_;
};

template <typename T>
class LayerNormGradOp : public OpKernel {
 public:
  explicit LayerNormGradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& dy_in = ctx->input(0);
    const Tensor& x_in = ctx->input(1);
    const Tensor& gamma_in = ctx->input(2);
    const Tensor& mean_in = ctx->input(3);
    const Tensor& rstd_in = ctx->input(4);
    OP_REQUIRES(ctx, TensorShapeUtils::IsMatrix(x_in.shape()) && dy_in.shape() == x_in.shape(),
                ::tensorflow::errors::InvalidArgument(
                    "AlbertLayerNormGrad: dy and x must be [rows, width] alike"));
    const int64_t rows = x_in.dim_size(0), width = x_in.dim_size(1);
    OP_REQUIRES(ctx,
                gamma_in.NumElements() == width && mean_in.NumElements() == rows &&
                    rstd_in.NumElements() == rows,
                ::tensorflow::errors::InvalidArgument("AlbertLayerNormGrad: bad statistics"));
    Tensor *dx_out = nullptr, *dgamma_out = nullptr, *dbeta_out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x_in.shape(), &dx_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({width}), &dgamma_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({width}), &dbeta_out));
    float* dgamma = dgamma_out->flat<float>().data();
    float* dbeta = dbeta_out->flat<float>().data();
    std::fill(dgamma, dgamma + width, 0.0f);
    std::fill(dbeta, dbeta + width, 0.0f);
    if (rows == 0) return;

    const T* dy = dy_in.flat<T>().data();
    const T* x = x_in.flat<T>().data();
    const float* gamma = gamma_in.flat<float>().data();
    const float* mean = mean_in.flat<float>().data();
    const float* rstd = rstd_in.flat<float>().data();
    T* dx = dx_out->flat<T>().data();

    // dgamma and dbeta sum over rows: each block of rows keeps its own
    // partial sums, added up at the end (fixed blocks: deterministic).
    const int64_t blocks = std::min<int64_t>(rows, 64);
    std::vector<float> partial(2 * blocks * width, 0.0f);

    auto work = [&](int64_t block_begin, int64_t block_end) {
      std::vector<float> xhat(width), g(width);
      for (int64_t b = block_begin; b < block_end; ++b) {
        float* pg = partial.data() + (2 * b) * width;
        float* pb = partial.data() + (2 * b + 1) * width;
        const int64_t r_begin = rows * b / blocks, r_end = rows * (b + 1) / blocks;
        for (int64_t r = r_begin; r < r_end; ++r) {
          const T* xr = x + r * width;
          const T* dyr = dy + r * width;
          const float mu = mean[r], inv = rstd[r];
          float sum_g = 0.0f, sum_gx = 0.0f;
          for (int64_t j = 0; j < width; ++j) {
            const float d = ToFloat(dyr[j]);
            xhat[j] = (ToFloat(xr[j]) - mu) * inv;
            g[j] = d * gamma[j];
            sum_g += g[j];
            sum_gx += g[j] * xhat[j];
            pg[j] += d * xhat[j];
            pb[j] += d;
          }
          const float mean_g = sum_g / width, mean_gx = sum_gx / width;
          T* dxr = dx + r * width;
          for (int64_t j = 0; j < width; ++j) {
            dxr[j] = FromFloat<T>(inv * (g[j] - mean_g - xhat[j] * mean_gx));
          }
        }
      }
    };
    ctx->device()->tensorflow_cpu_worker_threads()->workers->ParallelFor(
        blocks, kRowCost * width * (rows / blocks + 1), work);
    for (int64_t b = 0; b < blocks; ++b) {
      const float* pg = partial.data() + (2 * b) * width;
      const float* pb = partial.data() + (2 * b + 1) * width;
      for (int64_t j = 0; j < width; ++j) {
        dgamma[j] += pg[j];
        dbeta[j] += pb[j];
      }
    }
  }
};

// ------------------------------------------------- masked softmax (attention)
//
// scores [B, N, S, K] and mask [B, S, K] or [B, 1, K] (true where attending
// is allowed):
// softmax over K of the scores with disallowed ones set to -1e9, as the stock
// path (tf.where, then float32 softmax) does, so a row with nothing allowed
// becomes uniform. Float32 inside, one rounding out.

using Packet = Eigen::internal::packet_traits<float>::type;
constexpr int kPacket = Eigen::internal::unpacket_traits<Packet>::size;
constexpr float kMaskedScore = -1e9f;

struct SoftmaxShape {
  int64_t batch, heads, queries, keys;
  int64_t mask_queries;  // S, or 1 for a key-padding mask shared by every query
  int64_t rows() const { return batch * heads * queries; }
  // The mask row a score row (b, n, q) reads.
  int64_t mask_row(int64_t row) const {
    const int64_t b = row / (heads * queries), q = row % queries;
    return b * mask_queries + (mask_queries == 1 ? 0 : q);
  }
};

::tensorflow::Status GetSoftmaxShape(const Tensor& scores, const Tensor& mask,
                                     SoftmaxShape* shape) {
  if (scores.dims() != 4 || mask.dims() != 3 || mask.dim_size(0) != scores.dim_size(0) ||
      (mask.dim_size(1) != scores.dim_size(2) && mask.dim_size(1) != 1) ||
      mask.dim_size(2) != scores.dim_size(3)) {
    return ::tensorflow::errors::InvalidArgument(
        "AlbertMaskedSoftmax: want scores [B, N, S, K] and mask [B, S or 1, K], got ",
        scores.shape().DebugString(), " and ", mask.shape().DebugString());
  }
  *shape = {scores.dim_size(0), scores.dim_size(1), scores.dim_size(2), scores.dim_size(3),
            mask.dim_size(1)};
  return ::tensorflow::OkStatus();
}

template <typename T>
class MaskedSoftmaxOp : public OpKernel {
 public:
  explicit MaskedSoftmaxOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& scores_in = ctx->input(0);
    const Tensor& mask_in = ctx->input(1);
    SoftmaxShape shape;
    OP_REQUIRES_OK(ctx, GetSoftmaxShape(scores_in, mask_in, &shape));
    Tensor* probs_out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, scores_in.shape(), &probs_out));
    const int64_t keys = shape.keys;
    const T* scores = scores_in.flat<T>().data();
    const bool* mask = mask_in.flat<bool>().data();
    T* probs = probs_out->flat<T>().data();

    auto work = [&](int64_t begin, int64_t end) {
      std::vector<float> row(keys);
      for (int64_t r = begin; r < end; ++r) {
        const T* sr = scores + r * keys;
        const bool* mr = mask + shape.mask_row(r) * keys;
        for (int64_t j = 0; j < keys; ++j) row[j] = mr[j] ? ToFloat(sr[j]) : kMaskedScore;
        float top = kMaskedScore;
        for (int64_t j = 0; j < keys; ++j) top = std::max(top, row[j]);
        // exp(x − max), vectorised: the bulk of this kernel's arithmetic.
        const Packet ptop = Eigen::internal::pset1<Packet>(top);
        Packet psum = Eigen::internal::pset1<Packet>(0.0f);
        int64_t j = 0;
        for (; j + kPacket <= keys; j += kPacket) {
          Packet e = Eigen::internal::pexp(
              Eigen::internal::psub(Eigen::internal::ploadu<Packet>(&row[j]), ptop));
          Eigen::internal::pstoreu(&row[j], e);
          psum = Eigen::internal::padd(psum, e);
        }
        float sum = Eigen::internal::predux(psum);
        for (; j < keys; ++j) {
          row[j] = std::exp(row[j] - top);
          sum += row[j];
        }
        const float inv = 1.0f / sum;
        T* pr = probs + r * keys;
        for (int64_t k = 0; k < keys; ++k) pr[k] = FromFloat<T>(row[k] * inv);
      }
    };
    ctx->device()->tensorflow_cpu_worker_threads()->workers->ParallelFor(
        shape.rows(), 40 * keys, work);
  }
};

// dscores = p · (dp − Σ p·dp), and 0 where the mask replaced the score.
template <typename T>
class MaskedSoftmaxGradOp : public OpKernel {
 public:
  explicit MaskedSoftmaxGradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& dprobs_in = ctx->input(0);
    const Tensor& probs_in = ctx->input(1);
    const Tensor& mask_in = ctx->input(2);
    SoftmaxShape shape;
    OP_REQUIRES_OK(ctx, GetSoftmaxShape(probs_in, mask_in, &shape));
    OP_REQUIRES(ctx, dprobs_in.shape() == probs_in.shape(),
                ::tensorflow::errors::InvalidArgument("AlbertMaskedSoftmaxGrad: shapes differ"));
    Tensor* dscores_out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output({0}, 0, probs_in.shape(),
                                                              &dscores_out));
    const int64_t keys = shape.keys;
    const T* dprobs = dprobs_in.flat<T>().data();
    const T* probs = probs_in.flat<T>().data();
    const bool* mask = mask_in.flat<bool>().data();
    T* dscores = dscores_out->flat<T>().data();

    auto work = [&](int64_t begin, int64_t end) {
      std::vector<float> p(keys), dp(keys);
      for (int64_t r = begin; r < end; ++r) {
        const T* pr = probs + r * keys;
        const T* dpr = dprobs + r * keys;
        const bool* mr = mask + shape.mask_row(r) * keys;
        for (int64_t j = 0; j < keys; ++j) p[j] = ToFloat(pr[j]);
        for (int64_t j = 0; j < keys; ++j) dp[j] = ToFloat(dpr[j]);
        float dot = 0.0f;
        for (int64_t j = 0; j < keys; ++j) dot += p[j] * dp[j];
        T* out = dscores + r * keys;  // may alias dprobs: written after reading
        for (int64_t j = 0; j < keys; ++j) {
          out[j] = FromFloat<T>(mr[j] ? p[j] * (dp[j] - dot) : 0.0f);
        }
      }
    };
    ctx->device()->tensorflow_cpu_worker_threads()->workers->ParallelFor(
        shape.rows(), 8 * keys, work);
  }
};

// ------------------------------------------------------- split / merge heads
//
// The fused QKV projection gives [B, S, G·N·D] (G = 3 for q, k, v); attention
// wants G tensors [B, N, S, D]. A transpose of the 5-D view and an unstack
// cost two strided passes; this is one copy of D-element runs. Merge is the
// inverse (also the context's [B, N, S, D] → [B, S, N·D] with G = 1), and
// each is the other's gradient.

template <typename T>
class SplitHeadsOp : public OpKernel {
 public:
  explicit SplitHeadsOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("num", &num_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("heads", &heads_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x_in = ctx->input(0);
    OP_REQUIRES(ctx, x_in.dims() == 3,
                ::tensorflow::errors::InvalidArgument("AlbertSplitHeads: x must be [B, S, W]"));
    const int64_t batch = x_in.dim_size(0), seq = x_in.dim_size(1), width = x_in.dim_size(2);
    OP_REQUIRES(ctx, width % (num_ * heads_) == 0,
                ::tensorflow::errors::InvalidArgument("AlbertSplitHeads: width ", width,
                                                      " is not num × heads × depth"));
    const int64_t depth = width / (num_ * heads_);
    const T* x = x_in.flat<T>().data();
    std::vector<T*> outs(num_);
    for (int g = 0; g < num_; ++g) {
      Tensor* out = nullptr;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(g, TensorShape({batch, heads_, seq, depth}), &out));
      outs[g] = out->flat<T>().data();
    }
    const int64_t heads = heads_, num = num_;
    auto work = [&](int64_t begin, int64_t end) {
      for (int64_t bs = begin; bs < end; ++bs) {  // one (batch, position) row
        const int64_t b = bs / seq, s = bs % seq;
        const T* src = x + bs * width;
        for (int64_t g = 0; g < num; ++g) {
          for (int64_t n = 0; n < heads; ++n) {
            std::copy_n(src + (g * heads + n) * depth, depth,
                        outs[g] + ((b * heads + n) * seq + s) * depth);
          }
        }
      }
    };
    ctx->device()->tensorflow_cpu_worker_threads()->workers->ParallelFor(
        batch * seq, 2 * width, work);
  }

 private:
  int num_, heads_;
};

template <typename T>
class MergeHeadsOp : public OpKernel {
 public:
  explicit MergeHeadsOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("num", &num_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& first = ctx->input(0);
    OP_REQUIRES(ctx, first.dims() == 4,
                ::tensorflow::errors::InvalidArgument("AlbertMergeHeads: inputs must be [B, N, S, D]"));
    for (int g = 1; g < num_; ++g) {
      OP_REQUIRES(ctx, ctx->input(g).shape() == first.shape(),
                  ::tensorflow::errors::InvalidArgument("AlbertMergeHeads: shapes differ"));
    }
    const int64_t batch = first.dim_size(0), heads = first.dim_size(1), seq = first.dim_size(2),
                  depth = first.dim_size(3), num = num_, width = num * heads * depth;
    Tensor* out_t = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({batch, seq, width}), &out_t));
    T* out = out_t->flat<T>().data();
    std::vector<const T*> ins(num_);
    for (int g = 0; g < num_; ++g) ins[g] = ctx->input(g).flat<T>().data();
    auto work = [&](int64_t begin, int64_t end) {
      for (int64_t bs = begin; bs < end; ++bs) {
        const int64_t b = bs / seq, s = bs % seq;
        T* dst = out + bs * width;
        for (int64_t g = 0; g < num; ++g) {
          for (int64_t n = 0; n < heads; ++n) {
            std::copy_n(ins[g] + ((b * heads + n) * seq + s) * depth, depth,
                        dst + (g * heads + n) * depth);
          }
        }
      }
    };
    ctx->device()->tensorflow_cpu_worker_threads()->workers->ParallelFor(
        batch * seq, 2 * width, work);
  }

 private:
  int num_;
};

::tensorflow::Status SameShape(InferenceContext* c) {
  c->set_output(0, c->input(0));
  return ::tensorflow::OkStatus();
}

}  // namespace

REGISTER_OP("AlbertGeluTanh")
    .Attr("T: {float, bfloat16}")
    .Input("x: T")
    .Output("y: T")
    .SetShapeFn(SameShape)
    .Doc("gelu_new (tanh approximation) in one pass, computed in float32.");

REGISTER_OP("AlbertGeluTanhGrad")
    .Attr("T: {float, bfloat16}")
    .Input("dy: T")
    .Input("x: T")
    .Output("dx: T")
    .SetShapeFn(SameShape)
    .Doc("Gradient of AlbertGeluTanh with respect to x, given dy.");

REGISTER_OP("AlbertLayerNorm")
    .Attr("T: {float, bfloat16}")
    .Attr("epsilon: float")
    .Input("x: T")
    .Input("gamma: float")
    .Input("beta: float")
    .Output("y: T")
    .Output("mean: float")
    .Output("rstd: float")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle x;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &x));
      c->set_output(0, x);
      c->set_output(1, c->Vector(c->Dim(x, 0)));
      c->set_output(2, c->Vector(c->Dim(x, 0)));
      return ::tensorflow::OkStatus();
    })
    .Doc("LayerNorm over the last axis of [rows, width]; also each row's mean and 1/sigma.");

REGISTER_OP("AlbertLayerNormGrad")
    .Attr("T: {float, bfloat16}")
    .Input("dy: T")
    .Input("x: T")
    .Input("gamma: float")
    .Input("mean: float")
    .Input("rstd: float")
    .Output("dx: T")
    .Output("dgamma: float")
    .Output("dbeta: float")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle x;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &x));
      c->set_output(0, x);
      c->set_output(1, c->Vector(c->Dim(x, 1)));
      c->set_output(2, c->Vector(c->Dim(x, 1)));
      return ::tensorflow::OkStatus();
    })
    .Doc("Gradients of AlbertLayerNorm: dx, dgamma, dbeta.");

REGISTER_OP("AlbertMaskedSoftmax")
    .Attr("T: {float, bfloat16}")
    .Input("scores: T")
    .Input("mask: bool")
    .Output("probs: T")
    .SetShapeFn(SameShape)
    .Doc("Softmax over the last axis of [B, N, S, K] scores, where a [B, S or 1, K] mask allows.");

REGISTER_OP("AlbertMaskedSoftmaxGrad")
    .Attr("T: {float, bfloat16}")
    .Input("dprobs: T")
    .Input("probs: T")
    .Input("mask: bool")
    .Output("dscores: T")
    .SetShapeFn(SameShape)
    .Doc("Gradient of AlbertMaskedSoftmax with respect to the scores.");

REGISTER_OP("AlbertSplitHeads")
    .Attr("T: {float, bfloat16}")
    .Attr("num: int >= 1")
    .Attr("heads: int >= 1")
    .Input("x: T")
    .Output("out: num * T")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle x;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 3, &x));
      int num, heads;
      TF_RETURN_IF_ERROR(c->GetAttr("num", &num));
      TF_RETURN_IF_ERROR(c->GetAttr("heads", &heads));
      auto depth = c->UnknownDim();
      if (c->ValueKnown(c->Dim(x, 2))) depth = c->MakeDim(c->Value(c->Dim(x, 2)) / (num * heads));
      for (int g = 0; g < num; ++g) {
        c->set_output(g, c->MakeShape({c->Dim(x, 0), c->MakeDim(heads), c->Dim(x, 1), depth}));
      }
      return ::tensorflow::OkStatus();
    })
    .Doc("[B, S, num·heads·D] → num tensors [B, heads, S, D].");

REGISTER_OP("AlbertMergeHeads")
    .Attr("T: {float, bfloat16}")
    .Attr("num: int >= 1")
    .Input("inputs: num * T")
    .Output("out: T")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle x;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &x));
      int num;
      TF_RETURN_IF_ERROR(c->GetAttr("num", &num));
      auto width = c->UnknownDim();
      if (c->ValueKnown(c->Dim(x, 1)) && c->ValueKnown(c->Dim(x, 3))) {
        width = c->MakeDim(num * c->Value(c->Dim(x, 1)) * c->Value(c->Dim(x, 3)));
      }
      c->set_output(0, c->MakeShape({c->Dim(x, 0), c->Dim(x, 2), width}));
      return ::tensorflow::OkStatus();
    })
    .Doc("num tensors [B, N, S, D] → [B, S, num·N·D]; the inverse of AlbertSplitHeads.");

#define ALBERT_REGISTER(T)                                                             \
  REGISTER_KERNEL_BUILDER(                                                             \
      Name("AlbertGeluTanh").Device(DEVICE_CPU).TypeConstraint<T>("T"), GeluTanhOp<T>); \
  REGISTER_KERNEL_BUILDER(                                                             \
      Name("AlbertGeluTanhGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"),            \
      GeluTanhGradOp<T>);                                                              \
  REGISTER_KERNEL_BUILDER(                                                             \
      Name("AlbertLayerNorm").Device(DEVICE_CPU).TypeConstraint<T>("T"), LayerNormOp<T>); \
  REGISTER_KERNEL_BUILDER(                                                             \
      Name("AlbertLayerNormGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"),           \
      LayerNormGradOp<T>);                                                             \
  REGISTER_KERNEL_BUILDER(                                                             \
      Name("AlbertMaskedSoftmax").Device(DEVICE_CPU).TypeConstraint<T>("T"),           \
      MaskedSoftmaxOp<T>);                                                             \
  REGISTER_KERNEL_BUILDER(                                                             \
      Name("AlbertMaskedSoftmaxGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"),       \
      MaskedSoftmaxGradOp<T>);                                                         \
  REGISTER_KERNEL_BUILDER(                                                             \
      Name("AlbertSplitHeads").Device(DEVICE_CPU).TypeConstraint<T>("T"), SplitHeadsOp<T>); \
  REGISTER_KERNEL_BUILDER(                                                             \
      Name("AlbertMergeHeads").Device(DEVICE_CPU).TypeConstraint<T>("T"), MergeHeadsOp<T>);

ALBERT_REGISTER(float)
ALBERT_REGISTER(Eigen::bfloat16)

}  // namespace albert_tf
