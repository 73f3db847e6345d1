// The autograd binding of the chunked decay kernel (kernels/decay/cuda/chunks.h), with three runners: the CUDA
// kernels; the same block programs run on the host for CPU tensors (the twin that tests bind to the naive
// recurrence in float64, so every line of the preparation and of the gates' gradients below is checked too); and
// the CPU programs around BLAS (kernels/decay/chunk_cpu.h), the CPU's fast chunked form.
//
// Preparation: steps padded to a multiple of the chunk, D and M to multiples of 16 (zero keys, values and queries,
// log-gates 0: nothing changes), the log-gates floored (log_gate_floor) and summed from each chunk's start by the
// gate programs (kernels/decay/cuda/gates.h: compensated sums in fp32, fp64 for fp64 inputs).
// The kernels give y, dq, dk, dv without the diagonal pair (s = t, on which no gate acts); it is added as they leave
// the padded layout (kernels/decay/cuda/diagonal.h, a launch on the GPU, the same code in loops on the host). The
// gates' gradients follow from the sums without it (flash-linear-attention's identity, here on both sides): with
// the gates' running sums over the whole sequence, every pair term depends on G_t - G_s, so
//   dL/dB_t = q_t * dq_t - k_t * dk_t,   dL/dA_t = y_t * dy_t - v_t * dv_t,
// where the diagonal's terms cancel exactly and are left out (kernels/decay/cuda/chunks.h),
// plus, at the last step, the final state's own term (dS_T * S_T summed over rows / columns), and
// dL/dlog b_r = sum_{t>=r} dL/dB_t (a reverse running sum), the same for a: the gate programs' three passes, on the
// GPU or in loops on the host, so that no runner sums along the sequence and none in fp64 for 16/32-bit inputs.
#include "kernels/decay/decay.h"

#if defined(FWLAB_HAVE_CUDA)
#include "kernels/decay/cuda/chunks_api.h"
#include "kernels/cuda_stream.h"
#endif
#include "kernels/common/cpu_blas.h"
#include "kernels/cuda/chunk_binding.h"
#include "kernels/decay/chunk_cpu.h"
#include "kernels/decay/cuda/chunks_host.h"
#include "kernels/decay/cuda/diagonal.h"
#include "kernels/decay/cuda/gates.h"

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

enum class Runner : int64_t { host = 0, gpu = 1, blas = 2 };

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
  // [B * H, chunks + 1, Dp, Mp] back to a state [B, H, D, M] at chunk n.
  torch::Tensor state_out(const torch::Tensor& states, int64_t n) const {
    return states.select(1, n).narrow(1, 0, D).narrow(2, 0, M).reshape({batch, H, D, M});
  }
};

torch::Tensor chunk_sums(const torch::Tensor& log_gate, const Prepared& p, int64_t width, Runner runner);

// The BLAS runner takes each step's gate, not the gates summed from each chunk's start (add_step_gates).
Prepared prepare(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& log_a,
                 const torch::Tensor& log_b, const torch::Tensor& S0, Runner runner) {
  const bool sums = runner != Runner::blas;
  Prepared p;
  p.batch = q.size(0), p.H = q.size(1), p.T = q.size(2), p.M = q.size(3), p.D = v.size(3);
  p.Tp = (p.T + kChunk - 1) / kChunk * kChunk, p.Dp = round16(p.D), p.Mp = round16(p.M);
  p.acc = acc_type(q.scalar_type());
  p.q = flat_padded(q, p.Tp, p.Mp), p.k = flat_padded(k.to(q.scalar_type()), p.Tp, p.Mp);
  p.v = flat_padded(v.to(q.scalar_type()), p.Tp, p.Dp);
  p.a_width = log_a.numel() > 0 ? (log_a.size(3) == 1 ? 1 : p.Dp) : 0;
  if (p.a_width > 0 && sums) p.A = chunk_sums(log_a, p, p.a_width, runner);
  if (log_b.numel() > 0 && sums) p.B = chunk_sums(log_b, p, p.Mp, runner);
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

// ---- the gates and the diagonal pair (kernels/decay/cuda/gates.h, diagonal.h): launches on the GPU, the same
// programs in loops on the host ----

// Items [0, count) of the diagonal pair on the host, over libtorch's threads.
template <typename F>
void host_items(int64_t count, const F& item) {
  at::parallel_for(0, count, 64, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) item(i);
  });
}

// Blocks [0, count) of a gate program on the host (each a (head, chunk) or a head), every column of a block at once
// with `columns` values of scratch for its sums, over libtorch's threads.
template <typename Acc, typename F>
void host_blocks(int64_t count, int64_t columns, const F& block) {
  at::parallel_for(0, count, 1, [&](int64_t begin, int64_t end) {
    std::vector<Acc> sum(columns), lost(columns);
    for (int64_t i = begin; i < end; ++i) block(i, sum.data(), lost.data());
  });
}

// A log-gate [B, H, T, w] summed from each chunk's start: [B * H, Tp, width] in the accumulation type.
torch::Tensor chunk_sums(const torch::Tensor& log_gate, const Prepared& p, int64_t width, Runner runner) {
  const auto x = log_gate.to(p.acc).contiguous();
  auto out = torch::empty({p.heads(), p.Tp, width}, x.options());
  cuda::GateSumArgs a;
  a.log_gate = x.data_ptr(), a.out = out.data_ptr(), a.heads = p.heads(), a.T = p.T, a.width = x.size(3);
  a.chunks = p.chunks(), a.out_width = width, a.floor = log_gate_floor(p.acc);
#if defined(FWLAB_HAVE_CUDA)
  if (runner == Runner::gpu) {
    const CudaDeviceGuard guard(x.get_device());
    check(cuda::decay_gate_sums(chunk_dtype(p.q.scalar_type(), "decay gate sums"), a,
                                current_cuda_stream(x.get_device())),
          "decay gate sums");
    return out;
  }
#endif
  auto run = [&](auto acc) {
    using Acc = decltype(acc);
    const cuda::GateSums<Acc> sums{a};
    host_blocks<Acc>(a.heads * a.chunks, width, [&](int64_t i, Acc* sum, Acc* lost) {
      sums.columns(i / a.chunks, i % a.chunks, 0, width, sum, lost);
    });
  };
  p.acc == torch::kFloat64 ? run(double{}) : run(float{});
  return out;
}

// One gate's gradient (gates.h's GateGradientArgs: x1 * y1 - x2 * y2, reverse running sums) as [B, H, T, out_width]
// in the log-gate's dtype. x1, x2 flat in the input type, y1, y2 flat in the accumulation type; final_term [B, H,
// out_width] or undefined.
torch::Tensor gate_gradient(const Prepared& p, Runner runner, const torch::Tensor& x1, const torch::Tensor& y1,
                            const torch::Tensor& x2, const torch::Tensor& y2, const torch::Tensor& final_term,
                            int64_t out_width, torch::ScalarType dtype) {
  auto out = torch::empty({p.heads(), p.T, out_width}, y1.options());
  auto totals = torch::empty({p.heads(), p.chunks(), out_width}, y1.options());
  const auto final_flat = final_term.defined() ? final_term.to(p.acc).contiguous() : final_term;
  cuda::GateGradientArgs a;
  a.x1 = x1.data_ptr(), a.x2 = x2.data_ptr(), a.y1 = y1.data_ptr(), a.y2 = y2.data_ptr();
  a.final_term = void_or_null(final_flat), a.totals = totals.data_ptr(), a.out = out.data_ptr();
  a.heads = p.heads(), a.T = p.T, a.steps = p.Tp, a.width = x1.size(2), a.out_width = out_width;
#if defined(FWLAB_HAVE_CUDA)
  if (runner == Runner::gpu) {
    const CudaDeviceGuard guard(x1.get_device());
    check(cuda::decay_gate_gradients(chunk_dtype(p.q.scalar_type(), "decay gate gradients"), a,
                                     current_cuda_stream(x1.get_device())),
          "decay gate gradients");
    return out.reshape({p.batch, p.H, p.T, out_width}).to(dtype);
  }
#endif
  dispatch_host(p.q.scalar_type(), "decay gate gradients", [&](auto in, auto acc) {
    using Acc = decltype(acc);
    const cuda::GateGradients<decltype(in), Acc> g{a};
    const int64_t N = p.chunks(), w = out_width;
    host_blocks<Acc>(p.heads() * N, w, [&](int64_t i, Acc* s, Acc* l) { g.chunk_totals(i / N, i % N, 0, w, s, l); });
    host_blocks<Acc>(p.heads(), w, [&](int64_t h, Acc* s, Acc* l) { g.later_chunks(h, 0, w, s, l); });
    host_blocks<Acc>(p.heads() * N, w, [&](int64_t i, Acc* s, Acc* l) { g.step_sums(i / N, i % N, 0, w, s, l); });
  });
  return out.reshape({p.batch, p.H, p.T, out_width}).to(dtype);
}

// The diagonal pair added to the chunk programs' sums as they leave the padded layout (diagonal.h): `d` holds the
// sums and the outputs, p the inputs and sizes.
void add_diagonal(const Prepared& p, Runner runner, cuda::DiagonalArgs d, bool backward) {
  d.q = p.q.data_ptr(), d.k = p.k.data_ptr(), d.v = p.v.data_ptr();
  d.heads = p.heads(), d.T = p.T, d.steps = p.Tp, d.D = p.D, d.M = p.M, d.Dp = p.Dp, d.Mp = p.Mp;
#if defined(FWLAB_HAVE_CUDA)
  if (runner == Runner::gpu) {
    const CudaDeviceGuard guard(p.q.get_device());
    const auto dtype = chunk_dtype(p.q.scalar_type(), "decay diagonal pair");
    const auto stream = current_cuda_stream(p.q.get_device());
    check(backward ? cuda::decay_diagonal_backward(dtype, d, stream) : cuda::decay_diagonal_forward(dtype, d, stream),
          "decay diagonal pair");
    return;
  }
#endif
  dispatch_host(p.q.scalar_type(), "decay diagonal pair", [&](auto in, auto acc) {
    const cuda::Diagonal<decltype(in), decltype(acc)> diagonal{d};
    host_items(diagonal.items(), [&](int64_t i) { backward ? diagonal.backward(i) : diagonal.forward(i); });
  });
}

// What the backward has for the gates' gradients: flat and padded as the kernel wrote them ([B * H, Tp, width]), dy in
// the input type; dS and S the final state's gradient (undefined: none) and the final state, [B, H, D, M].
struct GateInputs {
  torch::Tensor dy, y_off, dq_off, dk_off, dv_off, dS, S;
};

// The gates' gradients from the kernel's sums without the diagonal pair (kernels/decay/cuda/chunks.h says why):
// dlog_b from q * dq_off - k * dk_off, dlog_a from y_off * dy - v * dv_off, each plus the final state's term dS * S
// summed over the rows (b) or the columns (a, and over both for a gate the columns share).
std::pair<torch::Tensor, torch::Tensor> gate_gradients(const Prepared& p, Runner runner, const GateInputs& g,
                                                       const torch::Tensor& log_a, const torch::Tensor& log_b) {
  const auto final_term = g.dS.defined() ? g.dS.to(p.acc) * g.S.to(p.acc) : torch::Tensor();  // [B, H, D, M]
  auto part = [&](std::vector<int64_t> dims) { return final_term.defined() ? final_term.sum(dims) : final_term; };
  torch::Tensor dlog_a, dlog_b;
  if (log_b.numel() > 0)
    dlog_b = gate_gradient(p, runner, p.q, g.dq_off, p.k, g.dk_off, part({2}), p.M, log_b.scalar_type());
  if (log_a.numel() > 0) {
    const bool shared = log_a.size(3) == 1;
    dlog_a = gate_gradient(p, runner, g.dy, g.y_off, p.v, g.dv_off, shared ? part({2, 3}) : part({3}), shared ? 1 : p.D,
                           log_a.scalar_type());
  }
  return {dlog_a, dlog_b};
}

struct ChunksFunction : public torch::autograd::Function<ChunksFunction> {
  static variable_list forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor k, torch::Tensor v,
                               torch::Tensor log_a, torch::Tensor log_b, torch::Tensor S0, int64_t runner,
                               int64_t host_threads) {
    const auto r = static_cast<Runner>(runner);
    auto p = prepare(q, k, v, log_a, log_b, S0, r);
    p.host_threads = static_cast<int>(host_threads);
    if (r == Runner::blas) add_step_gates(p, log_a, log_b);
    ForwardOut out;
    out.y = torch::empty({p.heads(), p.Tp, p.Dp}, p.q.options().dtype(p.acc));
    out.states = torch::empty({p.heads(), p.chunks() + 1, p.Dp, p.Mp}, p.q.options().dtype(p.acc));
    run_forward(r, p, out);
    // The final state is copied out of `states` (every chunk-start state): a view would keep all of them alive as
    // long as the caller holds S, and through save_for_backward until the backward and beyond.
    const auto S = p.state_out(out.states, p.chunks()).clone(at::MemoryFormat::Contiguous);
    auto y = torch::empty({p.batch, p.H, p.T, p.D}, p.q.options());
    cuda::DiagonalArgs d;
    d.y_off = out.y.data_ptr(), d.y = y.data_ptr();
    add_diagonal(p, r, d, false);
    ctx->saved_data["runner"] = runner;
    ctx->saved_data["host_threads"] = host_threads;
    ctx->save_for_backward({q, k, v, log_a, log_b, S0, out.y, S});  // out.y: flat, as the gate programs read it
    return {y, S};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &log_a = saved[3], &log_b = saved[4], &S0 = saved[5],
               &y_flat = saved[6], &S = saved[7];
    const auto r = static_cast<Runner>(ctx->saved_data["runner"].toInt());
    auto p = prepare(q, k, v, log_a, log_b, S0, r);
    p.host_threads = static_cast<int>(ctx->saved_data["host_threads"].toInt());
    if (r == Runner::blas) add_step_gates(p, log_a, log_b);
    const auto acc = torch::TensorOptions().dtype(p.acc).device(q.device());
    const auto dy =
        grads[0].defined() ? grads[0].to(p.q.scalar_type()) : torch::zeros({p.batch, p.H, p.T, p.D}, p.q.options());
    const auto dy_flat = flat_padded(dy, p.Tp, p.Dp);
    const auto dS_flat = grads[1].defined() ? flat_state(grads[1], p.Dp, p.Mp, p.acc) : torch::Tensor();
    auto states = torch::empty({p.heads(), p.chunks() + 1, p.Dp, p.Mp}, acc), dstates = torch::empty_like(states);
    auto dq_flat = torch::empty({p.heads(), p.Tp, p.Mp}, acc), dk_flat = torch::empty_like(dq_flat);
    auto dv_flat = torch::empty({p.heads(), p.Tp, p.Dp}, acc);
    run_backward(r, p, dy_flat, dS_flat, states, dstates, dq_flat, dk_flat, dv_flat);
    const auto [dlog_a, dlog_b] =
        gate_gradients(p, r, {dy_flat, y_flat, dq_flat, dk_flat, dv_flat, grads[1], S}, log_a, log_b);
    cuda::DiagonalArgs d;
    d.wide_outputs = k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type();
    const auto out = d.wide_outputs ? acc : p.q.options();
    auto dq = torch::empty({p.batch, p.H, p.T, p.M}, out), dk = torch::empty_like(dq);
    auto dv = torch::empty({p.batch, p.H, p.T, p.D}, out);
    d.dy = dy_flat.data_ptr(), d.dq_off = dq_flat.data_ptr(), d.dk_off = dk_flat.data_ptr();
    d.dv_off = dv_flat.data_ptr(), d.dq = dq.data_ptr(), d.dk = dk.data_ptr(), d.dv = dv.data_ptr();
    add_diagonal(p, r, d, true);
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
  TORCH_CHECK(!log_a.defined() || (log_a.dim() == 4 && log_a.size(0) == q.size(0) && log_a.size(1) == q.size(1) &&
                                   log_a.size(2) == q.size(2) && (log_a.size(3) == v.size(3) || log_a.size(3) == 1)),
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
