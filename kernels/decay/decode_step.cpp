#include "kernels/decay/decode_step.h"

#include <cmath>
#include <vector>

#include "kernels/common/lane_dot.h"

namespace fwlab::kernels {
namespace {

struct DecodeShape {
  int64_t B, H, hd, m;
};

template <typename T>
FWLAB_HOT T logistic(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// out[j] = act(scale x·W[j] + bias[j]) for the m rows of one head's feature map, W [m, hd].
template <typename T>
FWLAB_HOT void decode_features(const T* x, const T* W, const T* bias, T scale, bool relu, const DecodeShape& s,
                               T* out) {
  for (int64_t j = 0; j < s.m; ++j) {
    const T acc = scale * lane_dot(x, W + j * s.hd, s.hd) + (bias ? bias[j] : T(0));
    out[j] = relu && acc < T(0) ? T(0) : acc;
  }
}

// One row of the state: S_out[j] = a S_in[j] key_gate[j] + v fk[j] (S_in null: zeros); returns S_out · fq.
template <typename T>
FWLAB_HOT T decode_state_row(const T* S_in, T a, T v, const T* key_gate, const T* fk, const T* fq, int64_t m,
                             T* S_out) {
  for (int64_t j = 0; j < m; ++j) S_out[j] = (S_in ? a * S_in[j] * key_gate[j] : T(0)) + v * fk[j];
  return lane_dot(S_out, fq, m);
}

// One (batch row, head): S_out = diag(σ(z)) S_in diag(σ(f)) + v fkᵀ, y = S_out fq.
template <typename T>
FWLAB_HOT void decode_head(const DecayDecodeInputs& in, const DecodeShape& s, int64_t b, int64_t h, T* y, T* S_out,
                           T* fq, T* fk, T* key_gate) {
  const int64_t inner = s.H * s.hd;
  const T* row = in.qkv.data_ptr<T>() + b * 3 * inner;
  const T* W = in.phi_w.data_ptr<T>() + h * s.m * s.hd;
  const T* bias = in.phi_b.defined() ? in.phi_b.data_ptr<T>() + h * s.m : nullptr;
  decode_features(row + h * s.hd, W, bias, static_cast<T>(in.query_scale), in.relu, s, fq);
  decode_features(row + inner + h * s.hd, W, bias, T(1), in.relu, s, fk);
  const T* v = row + 2 * inner + h * s.hd;
  const T* z = in.z.data_ptr<T>() + b * inner + h * s.hd;
  const T* f = in.f.data_ptr<T>() + (b * s.H + h) * s.m;
  for (int64_t j = 0; j < s.m; ++j) key_gate[j] = logistic(f[j]);
  const T* S_in = in.S.defined() ? in.S.data_ptr<T>() + (b * s.H + h) * s.hd * s.m : nullptr;
  for (int64_t i = 0; i < s.hd; ++i)
    y[h * s.hd + i] =
        decode_state_row(S_in ? S_in + i * s.m : nullptr, logistic(z[i]), v[i], key_gate, fk, fq, s.m, S_out + i * s.m);
}

// Every (batch row, head), compiled per instruction set (vector_clones.h).
template <typename T>
FWLAB_HOT void decode_all(const DecayDecodeInputs& in, const DecodeShape& s, T* y, T* S_out) {
  std::vector<T> scratch(static_cast<size_t>(3 * s.m));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      decode_head<T>(in, s, b, h, y + b * s.H * s.hd, S_out + (b * s.H + h) * s.hd * s.m, scratch.data(),
                     scratch.data() + s.m, scratch.data() + 2 * s.m);
}

FWLAB_VECTOR_CLONES void decode_all_entry(const DecayDecodeInputs& in, const DecodeShape& s, float* y, float* S_out) {
  decode_all(in, s, y, S_out);
}
FWLAB_VECTOR_CLONES void decode_all_entry(const DecayDecodeInputs& in, const DecodeShape& s, double* y, double* S_out) {
  decode_all(in, s, y, S_out);
}

}  // namespace

DecayDecodeResult decay_decode_step(const DecayDecodeInputs& in) {
  const DecodeShape s{in.qkv.size(0), in.phi_w.size(0), in.phi_w.size(2), in.phi_w.size(1)};
  TORCH_CHECK(in.qkv.is_cpu() && in.qkv.is_contiguous() && in.qkv.size(1) == 3 * s.H * s.hd,
              "decay_decode_step: qkv must be a contiguous [B, 3 H hd] CPU tensor");
  TORCH_CHECK(in.z.numel() == s.B * s.H * s.hd && in.f.numel() == s.B * s.H * s.m,
              "decay_decode_step: gates of the wrong size");
  const auto opt = in.qkv.options();
  DecayDecodeResult r{torch::empty({s.B, s.H * s.hd}, opt), torch::empty({s.B, s.H, s.hd, s.m}, opt)};
  if (in.qkv.scalar_type() == torch::kFloat32)
    decode_all_entry(in, s, r.y.data_ptr<float>(), r.S.data_ptr<float>());
  else
    decode_all_entry(in, s, r.y.data_ptr<double>(), r.S.data_ptr<double>());
  return r;
}

}  // namespace fwlab::kernels
