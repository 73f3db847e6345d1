// The autograd binding of the fused recurrent CUDA kernel (kernels/decay/cuda/fused.h). It uses libtorch's
// CPU-side API (tensors, data pointers), libtorch's current CUDA stream where libtorch has CUDA (cuda_stream.h)
// and the kernel's plain C++ API, so it compiles against any libtorch, Debian's CPU build included; without nvcc
// it is a stub that says so.
#include "kernels/decay/decay.h"

#if defined(FWLAB_HAVE_CUDA)
#include "kernels/decay/cuda/fused.h"
#include "kernels/cuda_stream.h"
#endif

namespace fwlab::kernels {

#if defined(FWLAB_HAVE_CUDA)

bool cuda_kernels_built() { return true; }

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <typename T>
const T* ptr_or_null(const torch::Tensor& x) {
  return x.numel() > 0 ? x.data_ptr<T>() : nullptr;
}

template <typename T>
cuda::DecayProblem<T> problem(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& la, const torch::Tensor& lb, const torch::Tensor& S0) {
  cuda::DecayProblem<T> p;
  p.q = q.data_ptr<T>(), p.k = k.data_ptr<T>(), p.v = v.data_ptr<T>();
  p.log_a = ptr_or_null<T>(la), p.log_b = ptr_or_null<T>(lb), p.state0 = S0.data_ptr<T>();
  p.heads = q.size(0) * q.size(1), p.steps = q.size(2), p.D = v.size(3), p.M = q.size(3);
  p.a_width = la.numel() > 0 ? la.size(3) : 0;
  return p;
}

void check(cudaError_t e, const char* what) { TORCH_CHECK(e == cudaSuccess, what, ": ", cudaGetErrorString(e)); }

struct CudaDecayFunction : public torch::autograd::Function<CudaDecayFunction> {
  static variable_list forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor k, torch::Tensor v,
                               torch::Tensor log_a, torch::Tensor log_b, torch::Tensor S0) {
    q = q.contiguous(), k = k.contiguous(), v = v.contiguous(), log_a = log_a.contiguous(), log_b = log_b.contiguous();
    S0 = S0.contiguous();
    const int64_t B = q.size(0), H = q.size(1), T = q.size(2), M = q.size(3), D = v.size(3);
    auto y = torch::empty({B, H, T, D}, v.options()), S = torch::empty({B, H, D, M}, v.options());
    torch::Tensor checkpoints;
    const CudaDeviceGuard guard(q.get_device());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "decay_recurrence_cuda_fused", [&] {
      const auto p = problem<scalar_t>(q, k, v, log_a, log_b, S0);
      checkpoints = torch::empty({p.heads, p.segments(), D, M}, v.options());
      check(cuda::decay_fused_forward(p, y.data_ptr<scalar_t>(), S.data_ptr<scalar_t>(),
                                      checkpoints.data_ptr<scalar_t>(), current_cuda_stream(q.get_device())),
            "decay_recurrence_cuda_fused");
    });
    ctx->save_for_backward({q, k, v, log_a, log_b, S0, checkpoints});
    return {y, S};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &log_a = saved[3], &log_b = saved[4], &S0 = saved[5],
               &checkpoints = saved[6];
    const auto dy = grads[0].defined() ? grads[0].contiguous() : torch::Tensor();
    const auto dS = grads[1].defined() ? grads[1].contiguous() : torch::Tensor();
    auto dq = torch::empty_like(q), dk = torch::empty_like(k), dv = torch::empty_like(v), dS0 = torch::empty_like(S0);
    auto dla = torch::empty_like(log_a), dlb = torch::empty_like(log_b);
    const CudaDeviceGuard guard(q.get_device());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "decay_recurrence_cuda_fused_backward", [&] {
      const auto p = problem<scalar_t>(q, k, v, log_a, log_b, S0);
      cuda::DecayGrads<scalar_t> g;
      g.dy = dy.defined() ? dy.data_ptr<scalar_t>() : nullptr,
      g.dstate_final = dS.defined() ? dS.data_ptr<scalar_t>() : nullptr;
      g.dq = dq.data_ptr<scalar_t>(), g.dk = dk.data_ptr<scalar_t>(), g.dv = dv.data_ptr<scalar_t>(),
      g.dstate0 = dS0.data_ptr<scalar_t>();
      g.dlog_a = dla.numel() > 0 ? dla.data_ptr<scalar_t>() : nullptr,
      g.dlog_b = dlb.numel() > 0 ? dlb.data_ptr<scalar_t>() : nullptr;
      const auto workspace =
          torch::empty({p.workspace_size()}, q.options());  // in PyTorch's allocator, freed on return
      g.workspace = workspace.data_ptr<scalar_t>();
      check(cuda::decay_fused_backward(p, checkpoints.data_ptr<scalar_t>(), g, current_cuda_stream(q.get_device())),
            "decay_recurrence_cuda_fused backward");
    });
    return {dq, dk, dv, dla.numel() > 0 ? dla : torch::Tensor(), dlb.numel() > 0 ? dlb : torch::Tensor(), dS0};
  }
};

}  // namespace

RecurrenceResult decay_recurrence_cuda_fused(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                             const torch::Tensor& log_a, const torch::Tensor& log_b,
                                             const torch::Tensor& state0) {
  TORCH_CHECK(q.is_cuda(), "decay_recurrence_cuda_fused: CUDA tensors expected");
  TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes() && v.dim() == 4 && v.size(2) == q.size(2),
              "decay_recurrence_cuda_fused: bad shapes");
  TORCH_CHECK(!log_a.defined() || log_a.size(3) == v.size(3) || log_a.size(3) == 1,
              "decay_recurrence_cuda_fused: log_a must be [B, H, T, D] or [B, H, T, 1]");
  TORCH_CHECK(!log_b.defined() || log_b.sizes() == q.sizes(),
              "decay_recurrence_cuda_fused: log_b must be [B, H, T, M]");
  auto S0 = state0.defined() ? state0 : torch::zeros({v.size(0), v.size(1), v.size(3), k.size(3)}, v.options());
  const auto absent = torch::empty({0}, v.options());  // a custom Function takes no undefined inputs
  auto out = CudaDecayFunction::apply(q, k, v, log_a.defined() ? log_a : absent, log_b.defined() ? log_b : absent, S0);
  return {out[0], out[1]};
}

#else

bool cuda_kernels_built() { return false; }

RecurrenceResult decay_recurrence_cuda_fused(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                             const torch::Tensor&, const torch::Tensor&, const torch::Tensor&) {
  TORCH_CHECK(false, "decay_recurrence_cuda_fused: fwlab was built without CUDA (no nvcc found; see cmake/cuda.cmake)");
}

#endif

}  // namespace fwlab::kernels
