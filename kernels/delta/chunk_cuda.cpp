// The autograd binding of the delta family's chunked kernel (kernels/delta/cuda/chunks.h), with two runners: the CUDA
// kernels, and the same block programs run on the host for CPU tensors (the twin the tests bind to the libtorch WY
// form in float64, so that every line of the preparation below is checked too).
//
// Preparation: steps padded to a multiple of the chunk (zero q, k, v and beta, log alpha 0: the state passes
// unchanged), flattened to [B * H, steps, width]; beta and log alpha in the accumulation type (fp32, fp64 for fp64
// inputs); alpha reaches the kernel as log alpha, taken here under autograd (alpha = 0 exactly as float's smallest
// normal number, as the libtorch form does), so d alpha is libtorch's.
#include <limits>

#include "kernels/delta/delta.h"

#if defined(FWLAB_HAVE_CUDA)
#include "kernels/cuda_stream.h"
#include "kernels/delta/cuda/chunks_api.h"
#endif
#include "kernels/cuda/chunk_binding.h"
#include "kernels/delta/cuda/chunks_host.h"

namespace fwlab::kernels {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using namespace chunk_binding;
constexpr int64_t kChunk = cuda::kChunk;

// [B, H, T, w] -> [B * H, Tp, w] in `type`, zero-padded.
torch::Tensor flat_padded(const torch::Tensor& x, int64_t Tp, torch::ScalarType type) {
  auto y = x.to(type);
  if (Tp != x.size(2)) y = torch::constant_pad_nd(y, {0, 0, 0, Tp - x.size(2)});
  return y.reshape({-1, Tp, x.size(3)}).contiguous();
}

// The kernel's inputs and workspaces for one call (forward or backward).
struct Prepared {
  torch::Tensor q, k, v, beta, log_alpha, state0;  // log_alpha undefined: the delta rule
  torch::Tensor g, W, U, u, du;
  int64_t batch, H, T, D, M, Tp;
  torch::ScalarType acc;
  int64_t heads() const { return batch * H; }
  int64_t chunks() const { return Tp / kChunk; }
  torch::Tensor steps_out(const torch::Tensor& x) const {  // [B * H, Tp, w] -> [B, H, T, w]
    return x.narrow(1, 0, T).reshape({batch, H, T, x.size(2)});
  }
};

Prepared prepare(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& log_alpha,
                 const torch::Tensor& beta, const torch::Tensor& S0, bool host) {
  Prepared p;
  p.batch = q.size(0), p.H = q.size(1), p.T = q.size(2), p.M = q.size(3), p.D = v.size(3);
  p.Tp = (p.T + kChunk - 1) / kChunk * kChunk, p.acc = acc_type(q.scalar_type());
  const auto in = q.scalar_type();
  p.q = flat_padded(q, p.Tp, in), p.k = flat_padded(k, p.Tp, in), p.v = flat_padded(v, p.Tp, in);
  p.beta = flat_padded(beta, p.Tp, p.acc).reshape({-1, p.Tp});
  if (log_alpha.numel() > 0) p.log_alpha = flat_padded(log_alpha, p.Tp, p.acc).reshape({-1, p.Tp});
  p.state0 = S0.to(p.acc).reshape({-1, p.D, p.M}).contiguous();
  // The host run fills its workspaces with NaN, so that a program reading what no earlier one wrote fails the tests.
  const auto opt = p.q.options().dtype(p.acc);
  auto work = [&](std::vector<int64_t> shape) {
    return host ? torch::full(shape, std::numeric_limits<double>::quiet_NaN(), opt) : torch::empty(shape, opt);
  };
  p.g = work({p.heads(), p.Tp}), p.W = work({p.heads(), p.Tp, p.M}), p.U = work({p.heads(), p.Tp, p.D});
  p.u = work({p.heads(), p.Tp, p.D}), p.du = work({p.heads(), p.Tp, p.D});
  return p;
}

// What each runner writes: y and the chunk-start states forward; the gradients backward.
struct Outputs {
  torch::Tensor y, states, dstates, dq, dk, dv, dbeta, dlog_alpha;
};

// ---- the host runner ----

template <typename In, typename Acc>
cuda::delta::Problem<In, Acc> host_problem(const Prepared& p, const torch::Tensor& dy, const torch::Tensor& dS) {
  auto in = [](const torch::Tensor& x) { return x.defined() ? static_cast<const In*>(x.data_ptr()) : nullptr; };
  auto acc = [](const torch::Tensor& x) { return x.defined() ? static_cast<const Acc*>(x.data_ptr()) : nullptr; };
  auto work = [](const torch::Tensor& x) { return static_cast<Acc*>(x.data_ptr()); };
  cuda::delta::Problem<In, Acc> c;
  c.q = in(p.q), c.k = in(p.k), c.v = in(p.v), c.dy = in(dy);
  c.beta = acc(p.beta), c.log_alpha = acc(p.log_alpha), c.state0 = acc(p.state0), c.dstate_final = acc(dS);
  c.g = work(p.g), c.W = work(p.W), c.U = work(p.U), c.u = work(p.u), c.du = work(p.du);
  c.heads = p.heads(), c.steps = p.Tp, c.D = p.D, c.M = p.M;
  return c;
}

template <typename Acc>
Acc* ptr(const torch::Tensor& x) {
  return x.defined() ? static_cast<Acc*>(x.data_ptr()) : nullptr;
}

// The host runs the plain block programs, or the tensor-core ones the GPU runs for bf16 and fp16 (tests).
struct HostRun {
  int threads = 1;
  bool tensor_cores = false;
};

void host_forward(const Prepared& p, Outputs& out, HostRun run) {
  dispatch_host(p.q.scalar_type(), "gated_delta_recurrence_chunks_host", [&](auto in, auto acc) {
    using In = decltype(in);
    using Acc = decltype(acc);
    cuda::delta::forward_on_host(host_problem<In, Acc>(p, {}, {}), ptr<Acc>(out.y), ptr<Acc>(out.states), run.threads,
                                 run.tensor_cores);
  });
}

void host_backward(const Prepared& p, const torch::Tensor& dy, const torch::Tensor& dS, Outputs& out, HostRun run) {
  dispatch_host(p.q.scalar_type(), "gated_delta_recurrence_chunks_host", [&](auto in, auto acc) {
    using In = decltype(in);
    using Acc = decltype(acc);
    const cuda::delta::Gradients<Acc> g{ptr<Acc>(out.dq), ptr<Acc>(out.dk), ptr<Acc>(out.dv), ptr<Acc>(out.dbeta),
                                        ptr<Acc>(out.dlog_alpha)};
    cuda::delta::backward_on_host(host_problem<In, Acc>(p, dy, dS), ptr<Acc>(out.states), ptr<Acc>(out.dstates), g,
                                  run.threads, run.tensor_cores);
  });
}

// ---- the CUDA runner ----

#if defined(FWLAB_HAVE_CUDA)

cuda::DeltaChunkArgs cuda_args(const Prepared& p, const torch::Tensor& dy, const torch::Tensor& dS) {
  cuda::DeltaChunkArgs a;
  a.dtype = chunk_dtype(p.q.scalar_type(), "gated_delta_recurrence_cuda_chunked");
  a.q = p.q.data_ptr(), a.k = p.k.data_ptr(), a.v = p.v.data_ptr(), a.dy = void_or_null(dy);
  a.beta = p.beta.data_ptr(), a.log_alpha = void_or_null(p.log_alpha), a.state0 = p.state0.data_ptr();
  a.dstate_final = void_or_null(dS);
  a.g = p.g.data_ptr(), a.W = p.W.data_ptr(), a.U = p.U.data_ptr(), a.u = p.u.data_ptr(), a.du = p.du.data_ptr();
  a.heads = p.heads(), a.steps = p.Tp, a.D = p.D, a.M = p.M;
  return a;
}

void cuda_forward(const Prepared& p, Outputs& out) {
  const CudaDeviceGuard guard(p.q.get_device());
  check(cuda::delta_chunks_forward(cuda_args(p, {}, {}), out.y.data_ptr(), out.states.data_ptr(),
                                   current_cuda_stream(p.q.get_device())),
        "gated_delta_recurrence_cuda_chunked");
}

void cuda_backward(const Prepared& p, const torch::Tensor& dy, const torch::Tensor& dS, Outputs& out) {
  const CudaDeviceGuard guard(p.q.get_device());
  check(cuda::delta_chunks_backward(cuda_args(p, dy, dS), out.states.data_ptr(), out.dstates.data_ptr(),
                                    out.dq.data_ptr(), out.dk.data_ptr(), out.dv.data_ptr(), out.dbeta.data_ptr(),
                                    const_cast<void*>(void_or_null(out.dlog_alpha)),
                                    current_cuda_stream(p.q.get_device())),
        "gated_delta_recurrence_cuda_chunked backward");
}

#endif

void run_forward(bool gpu, const Prepared& p, Outputs& out, HostRun host) {
#if defined(FWLAB_HAVE_CUDA)
  if (gpu) return cuda_forward(p, out);
#endif
  TORCH_CHECK(!gpu, "gated_delta_recurrence_cuda_chunked: fwlab was built without CUDA (see cmake/cuda.cmake)");
  host_forward(p, out, host);
}

void run_backward(bool gpu, const Prepared& p, const torch::Tensor& dy, const torch::Tensor& dS, Outputs& out,
                  HostRun host) {
#if defined(FWLAB_HAVE_CUDA)
  if (gpu) return cuda_backward(p, dy, dS, out);
#endif
  host_backward(p, dy, dS, out, host);
}

struct DeltaChunksFunction : public torch::autograd::Function<DeltaChunksFunction> {
  static variable_list forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor k, torch::Tensor v,
                               torch::Tensor log_alpha, torch::Tensor beta, torch::Tensor S0, bool gpu, int64_t threads,
                               bool tensor_cores) {
    const auto p = prepare(q, k, v, log_alpha, beta, S0, !gpu);
    const auto opt = p.q.options().dtype(p.acc);
    Outputs out;
    out.y = torch::empty({p.heads(), p.Tp, p.D}, opt);
    out.states = torch::empty({p.heads(), p.chunks() + 1, p.D, p.M}, opt);
    run_forward(gpu, p, out, HostRun{static_cast<int>(threads), tensor_cores});
    // The final state copied out of every chunk-start state, so that holding it does not hold all of them.
    const auto S = out.states.select(1, p.chunks()).reshape({p.batch, p.H, p.D, p.M}).clone();
    ctx->saved_data["gpu"] = gpu;
    ctx->saved_data["threads"] = threads;
    ctx->saved_data["tensor_cores"] = tensor_cores;
    ctx->save_for_backward({q, k, v, log_alpha, beta, S0});
    return {p.steps_out(out.y).to(q.scalar_type()), S};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &log_alpha = saved[3], &beta = saved[4], &S0 = saved[5];
    const bool gpu = ctx->saved_data["gpu"].toBool();
    const auto p = prepare(q, k, v, log_alpha, beta, S0, !gpu);
    const auto opt = p.q.options().dtype(p.acc);
    const auto dy = grads[0].defined() ? grads[0] : torch::zeros({p.batch, p.H, p.T, p.D}, opt);
    const auto dS = grads[1].defined() ? grads[1].to(p.acc).reshape({-1, p.D, p.M}).contiguous() : torch::Tensor();
    Outputs out;
    out.states = torch::empty({p.heads(), p.chunks() + 1, p.D, p.M}, opt), out.dstates = torch::empty_like(out.states);
    out.dq = torch::empty({p.heads(), p.Tp, p.M}, opt), out.dk = torch::empty_like(out.dq);
    out.dv = torch::empty({p.heads(), p.Tp, p.D}, opt), out.dbeta = torch::empty({p.heads(), p.Tp, 1}, opt);
    if (p.log_alpha.defined()) out.dlog_alpha = torch::empty({p.heads(), p.Tp, 1}, opt);
    const HostRun host{static_cast<int>(ctx->saved_data["threads"].toInt()), ctx->saved_data["tensor_cores"].toBool()};
    run_backward(gpu, p, flat_padded(dy, p.Tp, p.q.scalar_type()), dS, out, host);
    auto back = [&](const torch::Tensor& x, const torch::Tensor& like) {
      return x.defined() ? p.steps_out(x).to(like.scalar_type()) : torch::Tensor();
    };
    const auto dS0 = out.dstates.select(1, 0).reshape({p.batch, p.H, p.D, p.M}).to(S0.scalar_type());
    return {
        back(out.dq, q), back(out.dk, k), back(out.dv, v), back(out.dlog_alpha, log_alpha), back(out.dbeta, beta), dS0,
        torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

RecurrenceResult run_delta_chunks(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& alpha, const torch::Tensor& beta, const torch::Tensor& state0,
                                  bool gpu, HostRun host, const char* name) {
  TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes() && v.dim() == 4 && v.size(2) == q.size(2) &&
                  v.size(0) == q.size(0) && v.size(1) == q.size(1),
              name, ": q, k [B, H, T, M] and v [B, H, T, D] expected");
  const std::vector<int64_t> gate_shape{q.size(0), q.size(1), q.size(2), 1};
  TORCH_CHECK(beta.defined() && beta.sizes() == gate_shape, name, ": beta must be [B, H, T, 1]");
  TORCH_CHECK(!alpha.defined() || alpha.sizes() == gate_shape, name, ": alpha must be [B, H, T, 1]");
  const std::vector<int64_t> state_shape{q.size(0), q.size(1), v.size(3), q.size(3)};
  TORCH_CHECK(!state0.defined() || state0.sizes() == state_shape, name, ": state0 must be [B, H, D, M]");
  for (const auto* t : {&k, &v, &alpha, &beta, &state0})  // a pointer of another device would fault on the GPU
    TORCH_CHECK(!t->defined() || t->device() == q.device(), name, ": every input on q's device (", q.device(), ")");
  const auto acc = acc_type(q.scalar_type());
  const auto S0 =
      state0.defined() ? state0 : torch::zeros({v.size(0), v.size(1), v.size(3), k.size(3)}, v.options().dtype(acc));
  if (q.size(2) == 0) return {torch::zeros({v.size(0), v.size(1), 0, v.size(3)}, q.options()), S0.to(acc)};
  // log alpha under autograd (d alpha is libtorch's); alpha = 0 exactly as float's smallest normal number.
  const auto log_alpha = alpha.defined() ? alpha.clamp_min(std::numeric_limits<float>::min()).log()
                                         : torch::empty({0}, q.options().dtype(acc));
  auto out = DeltaChunksFunction::apply(q, k, v, log_alpha, beta, S0, gpu, static_cast<int64_t>(host.threads),
                                        host.tensor_cores);
  return {out[0], out[1]};
}

}  // namespace

bool delta_cuda_chunks_fit(const torch::Tensor& q, const torch::Tensor& v) {
#if defined(FWLAB_HAVE_CUDA)
  // The chunk programs' grid has the heads along y, at most 65,535.
  if (!q.is_cuda() || q.size(0) * q.size(1) > 65535) return false;
  const CudaDeviceGuard guard(q.get_device());
  cuda::DeltaChunkArgs a;
  a.dtype = chunk_dtype(q.scalar_type(), "gated_delta_recurrence_cuda_chunked");
  a.D = v.size(3), a.M = q.size(3);
  return cuda::delta_chunks_shared_bytes(a) <= shared_memory_limit();
#else
  (void)q, (void)v;
  return false;
#endif
}

RecurrenceResult gated_delta_recurrence_cuda_chunked(const torch::Tensor& q, const torch::Tensor& k,
                                                     const torch::Tensor& v, const torch::Tensor& alpha,
                                                     const torch::Tensor& beta, const torch::Tensor& state0) {
  TORCH_CHECK(q.is_cuda(), "gated_delta_recurrence_cuda_chunked: CUDA tensors expected");
  return run_delta_chunks(q, k, v, alpha, beta, state0, true, HostRun{}, "gated_delta_recurrence_cuda_chunked");
}

RecurrenceResult gated_delta_recurrence_chunks_host(const torch::Tensor& q, const torch::Tensor& k,
                                                    const torch::Tensor& v, const torch::Tensor& alpha,
                                                    const torch::Tensor& beta, const torch::Tensor& state0,
                                                    int threads_per_block, bool tensor_cores) {
  TORCH_CHECK(q.is_cpu(), "gated_delta_recurrence_chunks_host: CPU tensors expected");
  TORCH_CHECK(threads_per_block >= 1, "gated_delta_recurrence_chunks_host: threads_per_block must be >= 1");
  TORCH_CHECK(!tensor_cores || threads_per_block % 32 == 0,
              "gated_delta_recurrence_chunks_host: the tensor-core programs need whole warps (threads_per_block a "
              "multiple of 32)");
  return run_delta_chunks(q, k, v, alpha, beta, state0, false, HostRun{threads_per_block, tensor_cores},
                          "gated_delta_recurrence_chunks_host");
}

}  // namespace fwlab::kernels
