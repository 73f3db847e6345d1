#include "kernels/decay/decode_step.h"

#include <cmath>
#include <vector>

namespace fwlab::kernels {
namespace {

struct DecodeShape {
  int64_t B, H, hd, m;
};

template <typename T>
T logistic(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// out[j] = act(scale x·W[j] + bias[j]) for the m rows of one head's feature map, W [m, hd].
template <typename T>
void decode_features(const T* x, const T* W, const T* bias, T scale, bool relu, const DecodeShape& s, T* out) {
  for (int64_t j = 0; j < s.m; ++j) {
    T acc = 0;
    for (int64_t d = 0; d < s.hd; ++d) acc += x[d] * W[j * s.hd + d];
    acc = scale * acc + (bias ? bias[j] : T(0));
    out[j] = relu && acc < T(0) ? T(0) : acc;
  }
}

// One (batch row, head): S_out = diag(σ(z)) S_in diag(σ(f)) + v fkᵀ, y = S_out fq.
template <typename T>
void decode_head(const DecayDecodeInputs& in, const DecodeShape& s, int64_t b, int64_t h, T* y, T* S_out, T* fq, T* fk,
                 T* key_gate) {
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
  for (int64_t i = 0; i < s.hd; ++i) {
    const T a = logistic(z[i]);
    T acc = 0;
    for (int64_t j = 0; j < s.m; ++j) {
      const T before = S_in ? a * S_in[i * s.m + j] * key_gate[j] : T(0);
      const T after = before + v[i] * fk[j];
      S_out[i * s.m + j] = after;
      acc += after * fq[j];
    }
    y[h * s.hd + i] = acc;
  }
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
  AT_DISPATCH_FLOATING_TYPES(in.qkv.scalar_type(), "decay_decode_step", [&] {
    std::vector<scalar_t> scratch(static_cast<size_t>(3 * s.m));
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < s.H; ++h)
        decode_head<scalar_t>(in, s, b, h, r.y.data_ptr<scalar_t>() + b * s.H * s.hd,
                              r.S.data_ptr<scalar_t>() + (b * s.H + h) * s.hd * s.m, scratch.data(),
                              scratch.data() + s.m, scratch.data() + 2 * s.m);
  });
  return r;
}

}  // namespace fwlab::kernels
