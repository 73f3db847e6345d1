// Fused CPU kernel of the SRU elementwise recurrence with a hand-written backward. The SRU reference CPU kernel
// is forward-only (NOTES.md), so CPU training otherwise falls back to a per-step autograd loop. Every (batch,
// dimension) pair is an independent scalar recurrence; batches run on the ATen thread pool.
//
// Forward:  f = sigmoid(U1 + v_f c_{t-1} + b_f), r = sigmoid(U2 + v_r c_{t-1} + b_r),
//           c_t = f c_{t-1} + (1 - f) U0,        h_t = r c_t + (1 - r) x_t
// Backward (t = T..1, g = dL/dc_t from later steps):
//   g += dh r;  dr = dh (c_t - x);  dx = dh (1 - r);  df = g (c_{t-1} - U0);  dU0 = g (1 - f)
//   dU1 = df f (1 - f);  dU2 = dr r (1 - r);  g_prev = g f + dU1 v_f + dU2 v_r  (and v_f, v_r, b_f, b_r sums)
#include <ATen/Parallel.h>

#include <cmath>

#include "kernels/sru/sru.h"

namespace fwlab::kernels {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <typename T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

struct SruFunction : public torch::autograd::Function<SruFunction> {
  static variable_list forward(AutogradContext* ctx, torch::Tensor u, torch::Tensor x, torch::Tensor v_f,
                               torch::Tensor v_r, torch::Tensor b_f, torch::Tensor b_r, torch::Tensor c0) {
    u = u.contiguous();
    x = x.contiguous();
    v_f = v_f.contiguous();
    v_r = v_r.contiguous();
    b_f = b_f.contiguous();
    b_r = b_r.contiguous();
    c0 = c0.contiguous();
    const int64_t B = x.size(0), T = x.size(1), D = x.size(2);
    auto h = torch::empty_like(x);
    auto c_all = torch::empty_like(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "sru_recurrence_fused", [&] {
      const scalar_t *U = u.data_ptr<scalar_t>(), *X = x.data_ptr<scalar_t>(), *VF = v_f.data_ptr<scalar_t>(),
                     *VR = v_r.data_ptr<scalar_t>(), *BF = b_f.data_ptr<scalar_t>(), *BR = b_r.data_ptr<scalar_t>(),
                     *C0 = c0.data_ptr<scalar_t>();
      scalar_t *Hp = h.data_ptr<scalar_t>(), *C = c_all.data_ptr<scalar_t>();
      at::parallel_for(0, B, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t b = lo; b < hi; ++b)
          for (int64_t d = 0; d < D; ++d) {
            scalar_t c = C0[b * D + d];
            for (int64_t t = 0; t < T; ++t) {
              const scalar_t* ut = U + ((b * T + t) * 3) * D;
              const scalar_t f = sigmoid(ut[D + d] + VF[d] * c + BF[d]);
              const scalar_t r = sigmoid(ut[2 * D + d] + VR[d] * c + BR[d]);
              c = f * c + (1 - f) * ut[d];
              const int64_t i = (b * T + t) * D + d;
              C[i] = c;
              Hp[i] = r * c + (1 - r) * X[i];
            }
          }
      });
    });
    ctx->save_for_backward({u, x, v_f, v_r, b_f, b_r, c0, c_all});
    auto c_last = c_all.select(1, T - 1).clone();
    return {h, c_last};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    const auto &u = s[0], &x = s[1], &v_f = s[2], &v_r = s[3], &b_f = s[4], &b_r = s[5], &c0 = s[6], &c_all = s[7];
    const int64_t B = x.size(0), T = x.size(1), D = x.size(2);
    auto dh = grads[0].defined() ? grads[0].contiguous() : torch::zeros_like(x);
    auto dcT = grads[1].defined() ? grads[1].contiguous() : torch::zeros_like(c0);
    auto du = torch::empty_like(u), dx = torch::empty_like(x), dc0 = torch::empty_like(c0);
    auto dparams = torch::zeros({B, 4, D}, x.options());  // per-batch sums of dv_f, dv_r, db_f, db_r
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "sru_recurrence_fused_backward", [&] {
      const scalar_t *U = u.data_ptr<scalar_t>(), *X = x.data_ptr<scalar_t>(), *VF = v_f.data_ptr<scalar_t>(),
                     *VR = v_r.data_ptr<scalar_t>(), *BF = b_f.data_ptr<scalar_t>(), *BR = b_r.data_ptr<scalar_t>(),
                     *C0 = c0.data_ptr<scalar_t>(), *C = c_all.data_ptr<scalar_t>(), *DH = dh.data_ptr<scalar_t>(),
                     *DCT = dcT.data_ptr<scalar_t>();
      scalar_t *DU = du.data_ptr<scalar_t>(), *DX = dx.data_ptr<scalar_t>(), *DC0 = dc0.data_ptr<scalar_t>(),
               *DP = dparams.data_ptr<scalar_t>();
      at::parallel_for(0, B, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t b = lo; b < hi; ++b)
          for (int64_t d = 0; d < D; ++d) {
            scalar_t g = DCT[b * D + d];
            scalar_t dvf = 0, dvr = 0, dbf = 0, dbr = 0;
            for (int64_t t = T - 1; t >= 0; --t) {
              const int64_t i = (b * T + t) * D + d;
              const scalar_t* ut = U + ((b * T + t) * 3) * D;
              scalar_t* dut = DU + ((b * T + t) * 3) * D;
              const scalar_t c_prev = t > 0 ? C[i - D] : C0[b * D + d];
              const scalar_t f = sigmoid(ut[D + d] + VF[d] * c_prev + BF[d]);
              const scalar_t r = sigmoid(ut[2 * D + d] + VR[d] * c_prev + BR[d]);
              const scalar_t c = C[i];
              g += DH[i] * r;
              const scalar_t dr = DH[i] * (c - X[i]);
              DX[i] = DH[i] * (1 - r);
              const scalar_t df = g * (c_prev - ut[d]);
              dut[d] = g * (1 - f);
              const scalar_t dpf = df * f * (1 - f), dpr = dr * r * (1 - r);
              dut[D + d] = dpf;
              dut[2 * D + d] = dpr;
              dvf += dpf * c_prev;
              dvr += dpr * c_prev;
              dbf += dpf;
              dbr += dpr;
              g = g * f + dpf * VF[d] + dpr * VR[d];
            }
            DC0[b * D + d] = g;
            scalar_t* dp = DP + b * 4 * D;
            dp[d] = dvf;
            dp[D + d] = dvr;
            dp[2 * D + d] = dbf;
            dp[3 * D + d] = dbr;
          }
      });
    });
    auto sums = dparams.sum(0);  // [4, D]
    return {du, dx, sums[0], sums[1], sums[2], sums[3], dc0};
  }
};

}  // namespace

RecurrenceResult sru_recurrence_fused(const torch::Tensor& u_in, const torch::Tensor& x_in, const torch::Tensor& v_f,
                                      const torch::Tensor& v_r, const torch::Tensor& b_f, const torch::Tensor& b_r,
                                      const torch::Tensor& c0_in) {
  // Mixed precision: U comes from a low-precision product; the cell state runs in fp32.
  const auto u = widened_to_fp32(u_in), x = widened_to_fp32(x_in), c0 = widened_to_fp32(c0_in);
  if (!x.device().is_cpu() || x.size(1) == 0) return sru_recurrence_naive(u, x, v_f, v_r, b_f, b_r, c0);
  auto c = c0.defined() ? c0 : torch::zeros({x.size(0), x.size(2)}, x.options());
  auto out = SruFunction::apply(u, x, v_f, v_r, b_f, b_r, c);
  return {out[0], out[1]};
}

}  // namespace fwlab::kernels
