// The autograd binding of the chunked decay kernel (kernels/decay/cuda/chunks.h), with three runners: the CUDA
// kernels; the same block programs run on the host for CPU tensors (the twin that tests bind to the naive
// recurrence in float64, so every line of the preparation and of the gates' gradients below is checked too); and
// the CPU programs around BLAS (kernels/decay/chunk_cpu.h), the CPU's fast chunked form.
//
// Preparation: steps padded to a multiple of the chunk, D and M to multiples of 16 (zero keys, values and queries,
// log-gates 0: nothing changes), the log-gates floored (log_gate_floor) and summed from each chunk's start in fp64,
// then kept in fp32 (fp64 for fp64 inputs).
// The kernels give y, dq, dk, dv without the diagonal pair (s = t, on which no gate acts); it is added here. The
// gates' gradients follow from the sums without it (flash-linear-attention's identity, here on both sides): with
// the gates' running sums over the whole sequence, every pair term depends on G_t - G_s, so
//   dL/dB_t = q_t * dq_t - k_t * dk_t,   dL/dA_t = y_t * dy_t - v_t * dv_t,
// where the diagonal's terms cancel exactly and are left out (kernels/decay/cuda/chunks.h),
// plus, at the last step, the final state's own term (dS_T * S_T summed over rows / columns), and
// dL/dlog b_r = sum_{t>=r} dL/dB_t (a reverse running sum), the same for a.
#include "kernels/decay/decay.h"

#if defined(FWLAB_HAVE_CUDA)
#include "kernels/decay/cuda/chunks_api.h"
#include "kernels/cuda_stream.h"
#endif
#include "kernels/common/cpu_blas.h"
#include "kernels/cuda/chunk_binding.h"
#include "kernels/decay/chunk_cpu.h"
#include "kernels/decay/cuda/chunks_host.h"

namespace fwlab::kernels {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using namespace chunk_binding;
constexpr int64_t kChunk = cuda::kChunk;

int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

// [B, H, T, w] -> [B * H, Tp, width], zero-padded.
torch::Tensor flat_padded(const torch::Tensor& x, int64_t Tp, int64_t width) {
  if (width == x.size(3) && Tp == x.size(2)) return x.reshape({-1, Tp, width}).contiguous();  // no copy to pad
  auto padded = torch::constant_pad_nd(x, {0, width - x.size(3), 0, Tp - x.size(2)});
  return padded.reshape({-1, Tp, width}).contiguous();
}

// [B, H, D, M] -> [B * H, Dp, Mp] in the accumulation type.
torch::Tensor flat_state(const torch::Tensor& S, int64_t Dp, int64_t Mp, torch::ScalarType acc) {
  auto padded = torch::constant_pad_nd(S.to(acc), {0, Mp - S.size(3), 0, Dp - S.size(2)});
  return padded.reshape({-1, Dp, Mp}).contiguous();
}

// The lowest log-gate the kernel sees. A gate of exactly 0 (log -inf) would make every pair difference after it in
// its chunk (-inf) - (-inf) = NaN, where the recurrence simply forgets. Any log-gate below the floor has e^x = 0 in
// the accumulation type already (fp32 underflows below -104, fp64 below -745), so the pairs across it still vanish
// exactly; the price is the floor's rounding in the later sums of its chunk (ulp(110) = 8e-6 in fp32).
double log_gate_floor(torch::ScalarType acc) { return acc == torch::kFloat64 ? -750.0 : -110.0; }

// A log-gate summed from each chunk's start: [B * H, Tp, width] in the accumulation type. The sums run in float64
// (over up to 64 steps; then rounded once), so fp32 adds no rounding of its own along the chunk.
torch::Tensor chunk_sums(const torch::Tensor& log_gate, int64_t Tp, int64_t width, torch::ScalarType acc) {
  auto flat = flat_padded(log_gate.to(torch::kFloat64).clamp_min(log_gate_floor(acc)), Tp, width);
  auto sums = flat.reshape({flat.size(0), Tp / kChunk, kChunk, width}).cumsum(2).reshape({flat.size(0), Tp, width});
  return sums.to(acc).contiguous();
}

// What the forward writes, in the accumulation type: y without the diagonal pair, and the state at every chunk start.
struct ForwardOut {
  torch::Tensor y, states;
};

struct Prepared {
  torch::Tensor q, k, v, A, B, state0;  // A, B undefined where the gate is absent
  torch::Tensor a_step, b_step;         // the BLAS runner's: e^{log gate} per step, padded with 1
  int64_t batch, H, T, D, M, Tp, Dp, Mp, a_width;
  int host_threads = 1;  // the host runner's threads per block
  torch::ScalarType acc;

  int64_t heads() const { return batch * H; }
  int64_t chunks() const { return Tp / kChunk; }
  // [B * H, Tp|chunks + 1, rows, cols] back to [B, H, T, width] (or a state [B, H, D, M] at chunk n).
  torch::Tensor steps_out(const torch::Tensor& x, int64_t width) const {
    return x.narrow(1, 0, T).narrow(2, 0, width).reshape({batch, H, T, width});
  }
  torch::Tensor state_out(const torch::Tensor& states, int64_t n) const {
    return states.select(1, n).narrow(1, 0, D).narrow(2, 0, M).reshape({batch, H, D, M});
  }
};

// `sums`: the gates summed from each chunk's start, which the BLAS runner does not read (it takes each step's gate).
Prepared prepare(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& log_a,
                 const torch::Tensor& log_b, const torch::Tensor& S0, bool sums = true) {
  Prepared p;
  p.batch = q.size(0), p.H = q.size(1), p.T = q.size(2), p.M = q.size(3), p.D = v.size(3);
  p.Tp = (p.T + kChunk - 1) / kChunk * kChunk, p.Dp = round16(p.D), p.Mp = round16(p.M);
  p.acc = acc_type(q.scalar_type());
  p.q = flat_padded(q, p.Tp, p.Mp), p.k = flat_padded(k.to(q.scalar_type()), p.Tp, p.Mp);
  p.v = flat_padded(v.to(q.scalar_type()), p.Tp, p.Dp);
  p.a_width = log_a.numel() > 0 ? (log_a.size(3) == 1 ? 1 : p.Dp) : 0;
  if (p.a_width > 0 && sums) p.A = chunk_sums(log_a, p.Tp, p.a_width, p.acc);
  if (log_b.numel() > 0 && sums) p.B = chunk_sums(log_b, p.Tp, p.Mp, p.acc);
  p.state0 = flat_state(S0, p.Dp, p.Mp, p.acc);
  return p;
}

// ---- the host runner: the block programs on the CPU ----

template <typename In, typename Acc>
cuda::ChunkProblem<In, Acc> host_problem(const Prepared& p, const torch::Tensor& dy, const torch::Tensor& dS) {
  auto in = [](const torch::Tensor& x) { return x.defined() ? static_cast<const In*>(x.data_ptr()) : nullptr; };
  auto acc = [](const torch::Tensor& x) { return x.defined() ? static_cast<const Acc*>(x.data_ptr()) : nullptr; };
  cuda::ChunkProblem<In, Acc> c;
  c.q = in(p.q), c.k = in(p.k), c.v = in(p.v), c.dy = in(dy);
  c.A = acc(p.A), c.B = acc(p.B), c.state0 = acc(p.state0), c.dstate_final = acc(dS);
  c.heads = p.heads(), c.steps = p.Tp, c.D = p.Dp, c.M = p.Mp, c.a_width = p.a_width;
  return c;
}

void host_forward(const Prepared& p, ForwardOut& out) {
  dispatch_host(p.q.scalar_type(), "decay_recurrence_chunks_host", [&](auto in, auto acc) {
    using In = decltype(in);
    using Acc = decltype(acc);
    cuda::run_forward_on_host(host_problem<In, Acc>(p, {}, {}), static_cast<Acc*>(out.y.data_ptr()),
                              static_cast<Acc*>(out.states.data_ptr()), p.host_threads);
  });
}

void host_backward(const Prepared& p, const torch::Tensor& dy, const torch::Tensor& dS, torch::Tensor& states,
                   torch::Tensor& dstates, torch::Tensor& dq, torch::Tensor& dk, torch::Tensor& dv) {
  dispatch_host(p.q.scalar_type(), "decay_recurrence_chunks_host", [&](auto in, auto acc) {
    using In = decltype(in);
    using Acc = decltype(acc);
    auto out = [](torch::Tensor& x) { return static_cast<Acc*>(x.data_ptr()); };
    cuda::run_backward_on_host(host_problem<In, Acc>(p, dy, dS), out(states), out(dstates), out(dq), out(dk), out(dv),
                               p.host_threads);
  });
}

// ---- the BLAS runner: the CPU programs of kernels/decay/chunk_cpu.h ----

// Each step's gates, floored as the chunk sums are: the padding's log-gates are 0, its gates 1.
void add_step_gates(Prepared& p, const torch::Tensor& log_a, const torch::Tensor& log_b) {
  const double floor = log_gate_floor(p.acc);
  if (p.a_width > 0) p.a_step = flat_padded(log_a.to(p.acc).clamp_min(floor), p.Tp, p.a_width).exp();
  if (log_b.numel() > 0) p.b_step = flat_padded(log_b.to(p.acc).clamp_min(floor), p.Tp, p.Mp).exp();
}

template <typename T>
decay_blas::StepGates<T> step_gates(const Prepared& p) {
  return {p.a_step.defined() ? p.a_step.data_ptr<T>() : nullptr, p.b_step.defined() ? p.b_step.data_ptr<T>() : nullptr};
}

void blas_forward(const Prepared& p, ForwardOut& out) {
  AT_DISPATCH_FLOATING_TYPES(p.q.scalar_type(), "decay_recurrence_chunk_cpu", [&] {
    decay_blas::forward<scalar_t>(host_problem<scalar_t, scalar_t>(p, {}, {}), step_gates<scalar_t>(p),
                                  out.y.data_ptr<scalar_t>(), out.states.data_ptr<scalar_t>());
  });
}

void blas_backward(const Prepared& p, const torch::Tensor& dy, const torch::Tensor& dS, torch::Tensor& states,
                   torch::Tensor& dstates, torch::Tensor& dq, torch::Tensor& dk, torch::Tensor& dv) {
  AT_DISPATCH_FLOATING_TYPES(p.q.scalar_type(), "decay_recurrence_chunk_cpu_backward", [&] {
    decay_blas::backward<scalar_t>(host_problem<scalar_t, scalar_t>(p, dy, dS), step_gates<scalar_t>(p),
                                   states.data_ptr<scalar_t>(), dstates.data_ptr<scalar_t>(), dq.data_ptr<scalar_t>(),
                                   dk.data_ptr<scalar_t>(), dv.data_ptr<scalar_t>());
  });
}

// ---- the CUDA runner ----

#if defined(FWLAB_HAVE_CUDA)

cuda::ChunkArgs cuda_args(const Prepared& p, const torch::Tensor& dy, const torch::Tensor& dS) {
  cuda::ChunkArgs a;
  a.dtype = chunk_dtype(p.q.scalar_type(), "decay_recurrence_cuda_chunked");
  a.q = p.q.data_ptr(), a.k = p.k.data_ptr(), a.v = p.v.data_ptr(), a.dy = void_or_null(dy);
  a.A = void_or_null(p.A), a.B = void_or_null(p.B), a.state0 = p.state0.data_ptr(), a.dstate_final = void_or_null(dS);
  a.heads = p.heads(), a.steps = p.Tp, a.D = p.Dp, a.M = p.Mp, a.a_width = p.a_width;
  const int limit = shared_memory_limit();
  const int64_t need = cuda::decay_chunks_shared_bytes(a);
  TORCH_CHECK(need <= limit, "decay_recurrence_cuda_chunked: D = ", p.D, ", M = ", p.M, " in ", p.q.scalar_type(),
              " needs ", need, " bytes of shared memory per block, the GPU allows ", limit);
  return a;
}

void cuda_forward(const Prepared& p, ForwardOut& out) {
  const CudaDeviceGuard guard(p.q.get_device());
  check(cuda::decay_chunks_forward(cuda_args(p, {}, {}), out.y.data_ptr(), out.states.data_ptr(),
                                   current_cuda_stream(p.q.get_device())),
        "decay_recurrence_cuda_chunked");
}

void cuda_backward(const Prepared& p, const torch::Tensor& dy, const torch::Tensor& dS, torch::Tensor& states,
                   torch::Tensor& dstates, torch::Tensor& dq, torch::Tensor& dk, torch::Tensor& dv) {
  const CudaDeviceGuard guard(p.q.get_device());
  check(cuda::decay_chunks_backward(cuda_args(p, dy, dS), states.data_ptr(), dstates.data_ptr(), dq.data_ptr(),
                                    dk.data_ptr(), dv.data_ptr(), current_cuda_stream(p.q.get_device())),
        "decay_recurrence_cuda_chunked backward");
}

#endif

// ---- the autograd function over either runner ----

enum class Runner : int64_t { host = 0, gpu = 1, blas = 2 };

void run_forward(Runner r, const Prepared& p, ForwardOut& out) {
  if (r == Runner::blas) return blas_forward(p, out);
#if defined(FWLAB_HAVE_CUDA)
  if (r == Runner::gpu) return cuda_forward(p, out);
#endif
  TORCH_CHECK(r == Runner::host,
              "decay_recurrence_cuda_chunked: fwlab was built without CUDA (no nvcc found; see cmake/cuda.cmake)");
  host_forward(p, out);
}

void run_backward(Runner r, const Prepared& p, const torch::Tensor& dy, const torch::Tensor& dS, torch::Tensor& states,
                  torch::Tensor& dstates, torch::Tensor& dq, torch::Tensor& dk, torch::Tensor& dv) {
  if (r == Runner::blas) return blas_backward(p, dy, dS, states, dstates, dq, dk, dv);
#if defined(FWLAB_HAVE_CUDA)
  if (r == Runner::gpu) return cuda_backward(p, dy, dS, states, dstates, dq, dk, dv);
#endif
  host_backward(p, dy, dS, states, dstates, dq, dk, dv);
}

// sum_{t>=r} x_t along time (dim 2) with no scan along the sequence (on a GPU a cumsum over T is one thread per column
// walking all T steps): within each 64-step chunk in x's type, plus the sum of every later chunk, the chunk totals'
// reverse running sum in float64 over T / 64 values. A gate's gradient sums T terms, and fp32 rounding over T = 8k
// steps of bf16-scale terms is not small; here fp32 sums 64 terms at most (tests/test_cuda_host_paths.cpp checks
// T = 8192). Float64, [B, H, T, W].
torch::Tensor reverse_running_sum(const torch::Tensor& x) {
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), W = x.size(3), N = (T + kChunk - 1) / kChunk;
  const auto padded = N * kChunk == T ? x : torch::constant_pad_nd(x, {0, 0, 0, N * kChunk - T});
  const auto within = padded.reshape({B, H, N, kChunk, W}).flip(3).cumsum(3).flip(3);
  const auto totals = within.select(3, 0).to(torch::kFloat64);   // [B, H, N, W]
  const auto later = totals.flip(2).cumsum(2).flip(2) - totals;  // the chunks after each one
  return (within.to(torch::kFloat64) + later.unsqueeze(3)).reshape({B, H, N * kChunk, W}).narrow(2, 0, T);
}

// The inputs as the kernel saw them (k and v cast to q's dtype), in the accumulation type.
struct Rounded {
  torch::Tensor q, k, v;
  Rounded(const torch::Tensor& q_, const torch::Tensor& k_, const torch::Tensor& v_, torch::ScalarType acc)
      : q(q_.to(acc)), k(k_.to(q_.scalar_type()).to(acc)), v(v_.to(q_.scalar_type()).to(acc)) {}
};

// The gates' gradients from the kernel's sums without the diagonal pair (kernels/decay/cuda/chunks.h says why), dS the
// final state's gradient (undefined: none) and S the final state.
std::pair<torch::Tensor, torch::Tensor> gate_gradients(const Rounded& in, const torch::Tensor& y_off,
                                                       const torch::Tensor& dy, const torch::Tensor& dq_off,
                                                       const torch::Tensor& dk_off, const torch::Tensor& dv_off,
                                                       const torch::Tensor& log_a, const torch::Tensor& log_b,
                                                       const torch::Tensor& dS, const torch::Tensor& S) {
  const auto acc = y_off.scalar_type();
  const int64_t T = y_off.size(2);
  const auto final_term = dS.defined() ? dS.to(acc) * S.to(acc) : torch::Tensor();  // [B, H, D, M]
  torch::Tensor dlog_a, dlog_b;
  if (log_b.numel() > 0) {
    auto gB = in.q * dq_off - in.k * dk_off;
    if (final_term.defined()) gB.select(2, T - 1).add_(final_term.sum(2));
    dlog_b = reverse_running_sum(gB).to(log_b.scalar_type());
  }
  if (log_a.numel() > 0) {
    auto gA = y_off * dy - in.v * dv_off;
    if (final_term.defined()) gA.select(2, T - 1).add_(final_term.sum(3));
    if (log_a.size(3) == 1) gA = gA.sum(3, true);
    dlog_a = reverse_running_sum(gA).to(log_a.scalar_type());
  }
  return {dlog_a, dlog_b};
}

struct ChunksFunction : public torch::autograd::Function<ChunksFunction> {
  static variable_list forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor k, torch::Tensor v,
                               torch::Tensor log_a, torch::Tensor log_b, torch::Tensor S0, int64_t runner,
                               int64_t host_threads) {
    const bool blas = static_cast<Runner>(runner) == Runner::blas;
    auto p = prepare(q, k, v, log_a, log_b, S0, !blas);
    p.host_threads = static_cast<int>(host_threads);
    if (blas) add_step_gates(p, log_a, log_b);
    ForwardOut out;
    out.y = torch::empty({p.heads(), p.Tp, p.Dp}, p.q.options().dtype(p.acc));
    out.states = torch::empty({p.heads(), p.chunks() + 1, p.Dp, p.Mp}, p.q.options().dtype(p.acc));
    run_forward(static_cast<Runner>(runner), p, out);
    // The final state is copied out of `states` (every chunk-start state): a view would keep all of them alive as
    // long as the caller holds S, and through save_for_backward until the backward and beyond.
    const auto y_off = p.steps_out(out.y, p.D),
               S = p.state_out(out.states, p.chunks()).clone(at::MemoryFormat::Contiguous);
    const Rounded in(q, k, v, p.acc);
    const auto y = (y_off + (in.q * in.k).sum(3, true) * in.v).to(q.scalar_type());  // plus the diagonal pair
    ctx->saved_data["runner"] = runner;
    ctx->saved_data["host_threads"] = host_threads;
    ctx->save_for_backward({q, k, v, log_a, log_b, S0, y_off, S});
    return {y, S};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &log_a = saved[3], &log_b = saved[4], &S0 = saved[5],
               &y_off = saved[6], &S = saved[7];
    const bool blas = static_cast<Runner>(ctx->saved_data["runner"].toInt()) == Runner::blas;
    auto p = prepare(q, k, v, log_a, log_b, S0, !blas);
    p.host_threads = static_cast<int>(ctx->saved_data["host_threads"].toInt());
    if (blas) add_step_gates(p, log_a, log_b);
    const auto acc = torch::TensorOptions().dtype(p.acc).device(q.device());
    const auto dy = grads[0].defined() ? grads[0].to(p.q.scalar_type()) : torch::zeros(y_off.sizes(), p.q.options());
    const auto dy_flat = flat_padded(dy, p.Tp, p.Dp);
    const auto dS_flat = grads[1].defined() ? flat_state(grads[1], p.Dp, p.Mp, p.acc) : torch::Tensor();
    auto states = torch::empty({p.heads(), p.chunks() + 1, p.Dp, p.Mp}, acc), dstates = torch::empty_like(states);
    auto dq_flat = torch::empty({p.heads(), p.Tp, p.Mp}, acc), dk_flat = torch::empty_like(dq_flat);
    auto dv_flat = torch::empty({p.heads(), p.Tp, p.Dp}, acc);
    run_backward(static_cast<Runner>(ctx->saved_data["runner"].toInt()), p, dy_flat, dS_flat, states, dstates, dq_flat,
                 dk_flat, dv_flat);
    const auto dq_off = p.steps_out(dq_flat, p.M), dk_off = p.steps_out(dk_flat, p.M),
               dv_off = p.steps_out(dv_flat, p.D);
    const Rounded in(q, k, v, p.acc);
    const auto dy_acc = dy.to(p.acc);
    const auto [dlog_a, dlog_b] = gate_gradients(in, y_off, dy_acc, dq_off, dk_off, dv_off, log_a, log_b, grads[1], S);
    // The diagonal pair's share: y_t = ... + (q_t . k_t) v_t.
    const auto qk = (in.q * in.k).sum(3, true), dyv = (dy_acc * in.v).sum(3, true);
    const auto dq = dq_off + dyv * in.k, dk = dk_off + dyv * in.q, dv = dv_off + qk * dy_acc;
    const auto dS0 = p.state_out(dstates, 0).to(S0.scalar_type());
    return {dq.to(q.scalar_type()), dk.to(k.scalar_type()), dv.to(v.scalar_type()), dlog_a, dlog_b, dS0,
            torch::Tensor(),        torch::Tensor()};
  }
};

RecurrenceResult run_chunks(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const torch::Tensor& log_a, const torch::Tensor& log_b, const torch::Tensor& state0,
                            Runner runner, int host_threads, const char* name) {
  TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes() && v.dim() == 4 && v.size(2) == q.size(2) &&
                  v.size(0) == q.size(0) && v.size(1) == q.size(1),
              name, ": q, k [B, H, T, M] and v [B, H, T, D] expected");
  TORCH_CHECK(!log_a.defined() || (log_a.dim() == 4 && log_a.size(2) == q.size(2) &&
                                   (log_a.size(3) == v.size(3) || log_a.size(3) == 1)),
              name, ": log_a must be [B, H, T, D] or [B, H, T, 1]");
  TORCH_CHECK(!log_b.defined() || log_b.sizes() == q.sizes(), name, ": log_b must be [B, H, T, M]");
  const auto acc = acc_type(q.scalar_type());
  auto S0 =
      state0.defined() ? state0 : torch::zeros({v.size(0), v.size(1), v.size(3), k.size(3)}, v.options().dtype(acc));
  if (q.size(2) == 0) return {torch::zeros({v.size(0), v.size(1), 0, v.size(3)}, q.options()), S0.to(acc)};
  const auto absent = torch::empty({0}, q.options().dtype(acc));  // a custom Function takes no undefined inputs
  auto out = ChunksFunction::apply(q, k, v, log_a.defined() ? log_a : absent, log_b.defined() ? log_b : absent, S0,
                                   static_cast<int64_t>(runner), static_cast<int64_t>(host_threads));
  return {out[0], out[1]};
}

}  // namespace

bool cuda_chunks_fit(const torch::Tensor& q, const torch::Tensor& v) {
#if defined(FWLAB_HAVE_CUDA)
  // The chunk programs' grid has the heads along y, at most 65,535.
  if (!q.is_cuda() || q.size(0) * q.size(1) > 65535) return false;
  const CudaDeviceGuard guard(q.get_device());
  cuda::ChunkArgs a;
  a.dtype = chunk_dtype(q.scalar_type(), "decay_recurrence_cuda_chunked");
  a.D = round16(v.size(3)), a.M = round16(q.size(3));
  return cuda::decay_chunks_shared_bytes(a) <= shared_memory_limit();
#else
  (void)q, (void)v;
  return false;
#endif
}

RecurrenceResult decay_recurrence_cuda_chunked(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                               const torch::Tensor& log_a, const torch::Tensor& log_b,
                                               const torch::Tensor& state0) {
  TORCH_CHECK(q.is_cuda(), "decay_recurrence_cuda_chunked: CUDA tensors expected");
  return run_chunks(q, k, v, log_a, log_b, state0, Runner::gpu, 1, "decay_recurrence_cuda_chunked");
}

RecurrenceResult decay_recurrence_chunks_host(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                              const torch::Tensor& log_a, const torch::Tensor& log_b,
                                              const torch::Tensor& state0, int threads_per_block) {
  TORCH_CHECK(q.is_cpu(), "decay_recurrence_chunks_host: CPU tensors expected");
  TORCH_CHECK(threads_per_block >= 1, "decay_recurrence_chunks_host: threads_per_block must be >= 1");
  return run_chunks(q, k, v, log_a, log_b, state0, Runner::host, threads_per_block, "decay_recurrence_chunks_host");
}

RecurrenceResult decay_recurrence_chunk_cpu(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                            const torch::Tensor& log_a, const torch::Tensor& log_b,
                                            const torch::Tensor& state0) {
  TORCH_CHECK(q.is_cpu(), "decay_recurrence_chunk_cpu: CPU tensors expected");
  // One dtype throughout, the widest given (fp32 for 16-bit inputs), as the fused CPU kernel.
  const auto wide = torch::promote_types(widened_to_fp32(q).scalar_type(), widened_to_fp32(v).scalar_type());
  auto as_wide = [&](const torch::Tensor& x) { return x.defined() ? x.to(wide) : x; };
  if (!blas::available() || q.size(2) == 0)  // an empty sequence: the fused kernel keeps its autograd history
    return decay_recurrence_fused(as_wide(q), as_wide(k), as_wide(v), as_wide(log_a), as_wide(log_b), as_wide(state0));
  return run_chunks(as_wide(q), as_wide(k), as_wide(v), as_wide(log_a), as_wide(log_b), as_wide(state0), Runner::blas,
                    1, "decay_recurrence_chunk_cpu");
}

}  // namespace fwlab::kernels
