// The chunkwise and fused decay recurrences against their per-timestep twin, in float64: outputs, final state and
// the gradients of every input, for lengths that are and are not multiples of the chunk (segment).
#include <catch2/catch.hpp>

#include "kernels/decay/cuda/rows.h"
#include "kernels/decay/decay.h"
#include "kernels/delta/delta.h"
#include "kernels/sru/sru.h"
#include "tests/test_util.h"

using fwlab::test::max_abs_diff;
namespace K = fwlab::kernels;

namespace {

using Inputs = fwlab::test::DecayInputs;

// value_gate: 0 none, 1 scalar per head, 2 elementwise; key_gate: decay on the key side.
Inputs make_inputs(int64_t T, int value_gate, bool key_gate, bool with_state, double gate_strength = 1.0, int64_t B = 2,
                   int64_t H = 3, torch::ScalarType dtype = torch::kFloat64, int64_t M = 4, int64_t D = 5) {
  auto opt = torch::TensorOptions().dtype(dtype).requires_grad(true);
  Inputs in;
  in.q = torch::randn({B, H, T, M}, opt);
  in.k = torch::randn({B, H, T, M}, opt);
  in.v = torch::randn({B, H, T, D}, opt);
  auto log_gate = [&](int64_t width) {
    return (torch::log_sigmoid(torch::randn({B, H, T, width}, dtype) + 1.0) * gate_strength).requires_grad_(true);
  };
  if (value_gate == 1) in.log_a = log_gate(1);
  if (value_gate == 2) in.log_a = log_gate(D);
  if (key_gate) in.log_b = log_gate(M);
  if (with_state) in.state0 = torch::randn({B, H, D, M}, opt);
  return in;
}

struct Grads {
  torch::Tensor y, state;
  std::vector<torch::Tensor> grads;
};

enum class Form { naive, chunked, fused, cuda_rows, cuda_chunks, cuda_chunks_threads, chunk_cpu };

K::RecurrenceResult recurrence(const Inputs& in, Form form) {
  switch (form) {
    case Form::chunked:
      return K::decay_recurrence_chunked(in.q, in.k, in.v, in.log_a, in.log_b, in.state0, 16);
    case Form::fused:
      return K::decay_recurrence_fused(in.q, in.k, in.v, in.log_a, in.log_b, in.state0);
    case Form::cuda_chunks:
      return K::decay_recurrence_chunks_host(in.q, in.k, in.v, in.log_a, in.log_b, in.state0);
    case Form::cuda_chunks_threads:
      return K::decay_recurrence_chunks_host(in.q, in.k, in.v, in.log_a, in.log_b, in.state0, 5);
    case Form::chunk_cpu:
      return K::decay_recurrence_chunk_cpu(in.q, in.k, in.v, in.log_a, in.log_b, in.state0);
    default:
      return K::decay_recurrence_naive(in.q, in.k, in.v, in.log_a, in.log_b, in.state0);
  }
}

Grads run(const Inputs& in, Form form, const torch::Tensor& gy, const torch::Tensor& gs) {
  auto r = recurrence(in, form);
  auto loss = (r.y * gy).sum() + (r.state * gs).sum();
  return {r.y, r.state, torch::autograd::grad({loss}, in.all())};
}

// The CUDA kernel's row code (kernels/decay/cuda/rows.h) run on the host, row after row: forward, then the
// hand-written backward with the same upstream gradients.
Grads run_cuda_rows(const Inputs& in, const torch::Tensor& gy, const torch::Tensor& gs) {
  namespace C = fwlab::cuda;
  auto flat = [](const torch::Tensor& t) { return t.defined() ? t.detach().contiguous() : t; };
  const auto q = flat(in.q), k = flat(in.k), v = flat(in.v), la = flat(in.log_a), lb = flat(in.log_b),
             s0 = flat(in.state0);
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), M = q.size(3), D = v.size(3);
  auto ptr = [](const torch::Tensor& t) { return t.defined() ? t.data_ptr<double>() : nullptr; };
  C::DecayProblem<double> p;
  p.q = ptr(q), p.k = ptr(k), p.v = ptr(v), p.log_a = ptr(la), p.log_b = ptr(lb), p.state0 = ptr(s0);
  p.heads = B * H, p.steps = T, p.D = D, p.M = M, p.a_width = la.defined() ? la.size(3) : 0;
  auto opt = q.options();
  auto y = torch::empty({B, H, T, D}, opt), S = torch::empty({B, H, D, M}, opt);
  auto checkpoints = torch::empty({p.heads, p.segments(), D, M}, opt);
  for (int64_t h = 0; h < p.heads; ++h)
    for (int64_t i = 0; i < D; ++i)
      C::decay_row_forward(p, h, i, y.data_ptr<double>(), S.data_ptr<double>(), checkpoints.data_ptr<double>());
  const auto dy = gy.contiguous(), ds = gs.contiguous();
  auto dq = torch::zeros_like(q), dk = torch::zeros_like(k), dv = torch::zeros_like(v),
       dS0 = torch::zeros({B, H, D, M}, opt);
  auto dla = la.defined() ? torch::zeros_like(la) : torch::Tensor(),
       dlb = lb.defined() ? torch::zeros_like(lb) : torch::Tensor();
  C::DecayGrads<double> g;
  g.dy = dy.data_ptr<double>(), g.dstate_final = ds.data_ptr<double>();
  g.dq = ptr(dq), g.dk = ptr(dk), g.dv = ptr(dv), g.dlog_a = ptr(dla), g.dlog_b = ptr(dlb), g.dstate0 = ptr(dS0);
  auto workspace = torch::full({p.workspace_size()}, std::nan(""), opt);  // as the GPU's allocator gives it: not zeros
  g.workspace = workspace.data_ptr<double>();
  for (int64_t h = 0; h < p.heads; ++h)
    for (int64_t i = 0; i < D; ++i) C::decay_row_backward(p, h, i, checkpoints.data_ptr<double>(), g, C::AddPlain{});
  Grads out{y, S, {dq, dk, dv}};
  if (dla.defined()) out.grads.push_back(dla);
  if (dlb.defined()) out.grads.push_back(dlb);
  if (in.state0.defined()) out.grads.push_back(dS0);
  return out;
}

// `form` against the naive twin; `tolerance` relative to the largest magnitude of each compared tensor.
void check_equal(const Inputs& in, Form form = Form::chunked, double tolerance = 1e-10) {
  auto probe = K::decay_recurrence_naive(in.q, in.k, in.v, in.log_a, in.log_b, in.state0);
  auto gy = torch::randn_like(probe.y), gs = torch::randn_like(probe.state);
  auto fast = form == Form::cuda_rows ? run_cuda_rows(in, gy, gs) : run(in, form, gy, gs),
       slow = run(in, Form::naive, gy, gs);
  auto close = [&](const torch::Tensor& a, const torch::Tensor& b) {
    return max_abs_diff(a, b) <= tolerance * std::max(1.0, b.detach().abs().max().item<double>());
  };
  CHECK(close(fast.y, slow.y));
  CHECK(close(fast.state, slow.state));
  if (form == Form::fused) {  // without gradients: no autograd node, no checkpoints (generation's decode step)
    const torch::NoGradGuard off;
    const auto plain = recurrence(in, form);
    CHECK_FALSE(plain.y.requires_grad());
    CHECK(close(plain.y, slow.y));
    CHECK(close(plain.state, slow.state));
  }
  const char* names[] = {"q", "k", "v", "log_a", "log_b", "state0"};
  size_t gi = 0;
  int slot = 0;
  for (const auto& t : {in.q, in.k, in.v, in.log_a, in.log_b, in.state0}) {
    if (t.defined()) {
      INFO("gradient of " << names[slot]);
      CHECK(close(fast.grads[gi], slow.grads[gi]));
      ++gi;
    }
    ++slot;
  }
}

}  // namespace

// `form` against the naive twin for every gate layout (the rules' special cases), the given lengths, with and
// without an initial state.
static void check_gate_layouts(Form form, std::initializer_list<int64_t> lengths, double tolerance) {
  struct Case {
    const char* rule;
    int value_gate;
    bool key_gate;
  };
  for (auto c : {Case{"add (no decay)", 0, false}, Case{"gated (scalar value-side decay)", 1, false},
                 Case{"decay (value and key side)", 2, true}, Case{"key-side decay only", 0, true},
                 Case{"value-side decay only", 2, false}}) {
    for (int64_t T : lengths) {
      for (bool with_state : {false, true}) {
        DYNAMIC_SECTION(c.rule << ", T=" << T << (with_state ? ", initial state" : ", zero state")) {
          check_equal(make_inputs(T, c.value_gate, c.key_gate, with_state), form, tolerance);
        }
      }
    }
  }
}

TEST_CASE("decay recurrence: chunkwise == naive (outputs, state, gradients), float64", "[kernels]") {
  torch::manual_seed(1);
  check_gate_layouts(Form::chunked, {32, 37, 5}, 1e-10);
}

TEST_CASE("decay recurrence: fused CPU kernel == naive loop (outputs, state, gradients), float64", "[kernels]") {
  torch::manual_seed(11);
  check_gate_layouts(Form::fused, {1, 15, 16, 17, 53},
                     1e-11);  // around the 16-step segments: 1, C - 1, C, C + 1, 3C + 5
}

TEST_CASE(
    "decay recurrence: the CUDA kernel's row code, run on the host == naive loop (outputs, state, gradients), float64",
    "[kernels]") {
  torch::manual_seed(12);
  check_gate_layouts(Form::cuda_rows, {1, 16, 17, 53}, 1e-11);
  SECTION("strong decay: log-gates around -40") {
    check_equal(make_inputs(53, 2, true, true, 40.0), Form::cuda_rows, 1e-11);
  }
  SECTION("no decay: log-gates exactly 0") { check_equal(make_inputs(37, 2, true, true, 0.0), Form::cuda_rows, 1e-11); }
}

// The extremes a chunked form must hold, against the naive twin: log-gates around -40 (gates ~ 4e-18) and exactly
// 0 (no decay) at lengths over two chunks, and float32 inputs.
static void check_extremes(Form form) {
  SECTION("strong decay: log-gates around -40") { check_equal(make_inputs(150, 2, true, true, 40.0), form, 1e-11); }
  SECTION("no decay: log-gates exactly 0") { check_equal(make_inputs(130, 2, true, true, 0.0), form, 1e-11); }
  SECTION("float32") { check_equal(make_inputs(100, 2, true, true, 1.0, 2, 3, torch::kFloat32), form, 2e-5); }
}

TEST_CASE(
    "decay recurrence: the chunked CUDA kernel's block programs and binding, run on the host == naive loop, float64",
    "[kernels]") {
  // 64-step chunks of 16-step sub-chunks: lengths inside one sub-chunk, across sub-chunks, around the chunk, and
  // several chunks; M = 4, D = 5 are padded to 16 by the binding.
  torch::manual_seed(14);
  check_gate_layouts(Form::cuda_chunks, {1, 17, 64, 65, 150}, 1e-11);
  check_extremes(Form::cuda_chunks);
  SECTION("M = 32, D = 48: several 16-wide tiles") {
    check_equal(make_inputs(100, 2, true, true, 1.0, 1, 2, torch::kFloat64, 32, 48), Form::cuda_chunks, 1e-11);
  }
  SECTION("5 threads per block, meeting at the barriers (a missing barrier shows as wrong results)") {
    for (int value_gate : {1, 2})
      check_equal(make_inputs(150, value_gate, true, true, 1.0, 1, 2, torch::kFloat64, 20, 24),
                  Form::cuda_chunks_threads, 1e-11);
  }
}

TEST_CASE("decay recurrence: the chunked CPU kernel around BLAS == naive loop (outputs, state, gradients), float64",
          "[kernels]") {
  // Sub-chunks of 16 inside the binding's 64-step chunks: lengths inside one sub-chunk, across sub-chunks, around
  // the chunk and over several chunks; M = 4, D = 5 padded to 16.
  torch::manual_seed(15);
  REQUIRE(K::chunk_cpu_available());
  check_gate_layouts(Form::chunk_cpu, {1, 16, 17, 64, 65, 150}, 1e-11);
  check_extremes(Form::chunk_cpu);
  SECTION("M = 32, D = 48, a scalar value gate") {
    check_equal(make_inputs(100, 1, true, true, 1.0, 1, 2, torch::kFloat64, 32, 48), Form::chunk_cpu, 1e-11);
  }
}

TEST_CASE(
    "decay recurrence: the fused CUDA kernel through autograd == naive loop (outputs, state, gradients), float64 and "
    "float32",
    "[kernels]") {
  if (!K::cuda_kernels_built() || !torch::cuda::is_available()) {
    WARN("skipped: " << (K::cuda_kernels_built() ? "no CUDA device" : "fwlab was built without CUDA (no nvcc)"));
    return;
  }
  torch::manual_seed(13);
  for (auto dtype : {torch::kFloat64, torch::kFloat32})
    for (int value_gate : {0, 1, 2})
      for (int64_t T : {1, 17, 53}) {
        DYNAMIC_SECTION(c10::toString(dtype) << " value gate " << value_gate << ", T=" << T) {
          const auto in = make_inputs(T, value_gate, true, true, 1.0, 2, 3, dtype);
          auto on_gpu = [](const torch::Tensor& t) {
            return t.defined() ? t.detach().to(torch::kCUDA).requires_grad_(true) : t;
          };
          const Inputs gpu{on_gpu(in.q),     on_gpu(in.k),     on_gpu(in.v),
                           on_gpu(in.log_a), on_gpu(in.log_b), on_gpu(in.state0)};
          auto probe = K::decay_recurrence_naive(in.q, in.k, in.v, in.log_a, in.log_b, in.state0);
          auto gy = torch::randn_like(probe.y), gs = torch::randn_like(probe.state);
          const auto slow = run(in, Form::naive, gy, gs);
          auto r = K::decay_recurrence_cuda_fused(gpu.q, gpu.k, gpu.v, gpu.log_a, gpu.log_b, gpu.state0);
          auto loss = (r.y * gy.to(torch::kCUDA)).sum() + (r.state * gs.to(torch::kCUDA)).sum();
          const auto grads = torch::autograd::grad({loss}, gpu.all());
          const double tolerance = dtype == torch::kFloat64 ? 1e-10 : 1e-4;
          auto close = [&](const torch::Tensor& a, const torch::Tensor& b) {
            return max_abs_diff(a.cpu(), b) <= tolerance * std::max(1.0, b.detach().abs().max().item<double>());
          };
          CHECK(close(r.y, slow.y));
          CHECK(close(r.state, slow.state));
          for (size_t i = 0; i < grads.size(); ++i) CHECK(close(grads[i], slow.grads[i]));
        }
      }
}

TEST_CASE("decay recurrence: fused kernel at the extremes: gates near 0 and exactly 1, few and many heads, float32",
          "[kernels]") {
  torch::manual_seed(12);
  at::set_num_threads(2);
  SECTION("strong decay: log-gates around -40 (gates ~ 4e-18)") {
    check_equal(make_inputs(53, 2, true, true, 40.0), Form::fused, 1e-11);
  }
  SECTION("no decay: log-gates exactly 0 (gates = 1)") {
    check_equal(make_inputs(37, 2, true, true, 0.0), Form::fused, 1e-11);
  }
  SECTION("B x H = 1, fewer heads than threads") {
    check_equal(make_inputs(33, 2, true, true, 1.0, 1, 1), Form::fused, 1e-11);
  }
  SECTION("B x H = 12, more heads than threads") {
    check_equal(make_inputs(33, 1, true, false, 1.0, 4, 3), Form::fused, 1e-11);
  }
  SECTION("float32 against the float64 twin's tolerance") {
    check_equal(make_inputs(53, 2, true, true, 1.0, 2, 3, torch::kFloat32), Form::fused, 2e-5);
  }
}

TEST_CASE("decay recurrence: strong decay stays finite and exact in the chunkwise form", "[kernels]") {
  // Per-step log-gates around -40: a factorised e^{-A_s} would overflow even in float64 within one chunk.
  torch::manual_seed(2);
  auto in = make_inputs(40, 2, true, true, 40.0);
  auto fast = K::decay_recurrence_chunked(in.q, in.k, in.v, in.log_a, in.log_b, in.state0, 16);
  auto slow = K::decay_recurrence_naive(in.q, in.k, in.v, in.log_a, in.log_b, in.state0);
  REQUIRE(torch::isfinite(fast.y).all().item<bool>());
  CHECK(max_abs_diff(fast.y, slow.y) < 1e-10);
}

TEST_CASE("decay recurrence: matches the closed form sum over outer products", "[kernels]") {
  // y_t = sum_{s<=t} (prod_{s<r<=t} a_r * v_s) (prod_{s<r<=t} b_r * k_s)^T q_t, computed with no recurrence.
  torch::manual_seed(3);
  auto in = make_inputs(7, 2, true, false);
  auto y = K::decay_recurrence_chunked(in.q, in.k, in.v, in.log_a, in.log_b, {}, 3).y;
  for (int64_t t = 0; t < 7; ++t) {
    auto expect = torch::zeros_like(y.select(2, t));
    for (int64_t s = 0; s <= t; ++s) {
      auto la = in.log_a.narrow(2, s + 1, t - s).sum(2), lb = in.log_b.narrow(2, s + 1, t - s).sum(2);
      auto vs = in.v.select(2, s) * la.exp(), ks = in.k.select(2, s) * lb.exp();
      expect = expect + vs * (ks * in.q.select(2, t)).sum(-1, true);
    }
    CHECK(max_abs_diff(y.select(2, t), expect) < 1e-10);
  }
}

TEST_CASE("delta recurrence: step-by-step continuation equals one pass", "[kernels]") {
  torch::manual_seed(4);
  auto opt = torch::TensorOptions().dtype(torch::kFloat64);
  auto q = torch::randn({2, 2, 9, 4}, opt), k = torch::softmax(torch::randn({2, 2, 9, 4}, opt), -1);
  auto v = torch::randn({2, 2, 9, 3}, opt), beta = torch::sigmoid(torch::randn({2, 2, 9, 1}, opt));
  auto whole = K::delta_recurrence_naive(q, k, v, beta, {});
  torch::Tensor S;
  for (int64_t t = 0; t < 9; ++t) {
    auto r = K::delta_recurrence_step(q.select(2, t), k.select(2, t), v.select(2, t), beta.select(2, t), S);
    CHECK(max_abs_diff(r.y, whole.y.select(2, t)) < 1e-12);
    S = r.state;
  }
  // With beta = 1 and a one-hot key, the delta rule overwrites: reading the key back returns the new value.
  auto onehot = torch::zeros({1, 1, 4}, opt);
  onehot[0][0][2] = 1.0;
  auto S0 = torch::randn({1, 1, 3, 4}, opt), vnew = torch::randn({1, 1, 3}, opt);
  auto r = K::delta_recurrence_step(onehot, onehot, vnew, torch::ones({1, 1, 1}, opt), S0);
  CHECK(max_abs_diff(r.y, vnew) < 1e-12);
}

TEST_CASE("delta recurrence: fused CPU kernel == naive loop (outputs, state, gradients), float64", "[kernels]") {
  torch::manual_seed(5);
  auto opt = torch::TensorOptions().dtype(torch::kFloat64).requires_grad(true);
  for (bool with_state : {false, true}) {
    DYNAMIC_SECTION((with_state ? "initial state" : "zero state")) {
      const int64_t B = 2, H = 3, T = 13, M = 4, D = 5;
      auto q = torch::softmax(torch::randn({B, H, T, M}, torch::kFloat64), -1).requires_grad_(true);
      auto k = torch::softmax(torch::randn({B, H, T, M}, torch::kFloat64), -1).requires_grad_(true);
      auto v = torch::randn({B, H, T, D}, opt);
      auto beta = torch::sigmoid(torch::randn({B, H, T, 1}, torch::kFloat64)).requires_grad_(true);
      auto S0 = with_state ? torch::randn({B, H, D, M}, opt) : torch::Tensor();
      std::vector<torch::Tensor> wrt = {q, k, v, beta};
      if (with_state) wrt.push_back(S0);
      auto gy = torch::randn({B, H, T, D}, torch::kFloat64), gs = torch::randn({B, H, D, M}, torch::kFloat64);
      auto run = [&](bool fused) {
        auto r = fused ? K::delta_recurrence_fused(q, k, v, beta, S0) : K::delta_recurrence_naive(q, k, v, beta, S0);
        auto g = torch::autograd::grad({(r.y * gy).sum() + (r.state * gs).sum()}, wrt);
        return std::make_tuple(r.y, r.state, g);
      };
      auto [y1, s1, g1] = run(true);
      auto [y2, s2, g2] = run(false);
      CHECK(max_abs_diff(y1, y2) < 1e-12);
      CHECK(max_abs_diff(s1, s2) < 1e-12);
      const char* names[] = {"q", "k", "v", "beta", "state0"};
      for (size_t i = 0; i < g1.size(); ++i) {
        INFO("gradient of " << names[i]);
        CHECK(max_abs_diff(g1[i], g2[i]) < 1e-10);
      }
    }
  }
}

TEST_CASE("SRU recurrence: fused CPU kernel == naive loop (outputs, state, gradients), float64", "[kernels]") {
  torch::manual_seed(6);
  auto opt = torch::TensorOptions().dtype(torch::kFloat64).requires_grad(true);
  for (bool with_state : {false, true}) {
    DYNAMIC_SECTION((with_state ? "initial state" : "zero state")) {
      const int64_t B = 3, T = 11, D = 6;
      auto u = torch::randn({B, T, 3, D}, opt), x = torch::randn({B, T, D}, opt);
      auto v_f = torch::randn({D}, opt), v_r = torch::randn({D}, opt), b_f = torch::randn({D}, opt),
           b_r = torch::randn({D}, opt);
      auto c0 = with_state ? torch::randn({B, D}, opt) : torch::Tensor();
      std::vector<torch::Tensor> wrt = {u, x, v_f, v_r, b_f, b_r};
      if (with_state) wrt.push_back(c0);
      auto gh = torch::randn({B, T, D}, torch::kFloat64), gc = torch::randn({B, D}, torch::kFloat64);
      auto run = [&](bool fused) {
        auto r = fused ? K::sru_recurrence_fused(u, x, v_f, v_r, b_f, b_r, c0)
                       : K::sru_recurrence_naive(u, x, v_f, v_r, b_f, b_r, c0);
        auto g = torch::autograd::grad({(r.y * gh).sum() + (r.state * gc).sum()}, wrt);
        return std::make_tuple(r.y, r.state, g);
      };
      auto [h1, c1, g1] = run(true);
      auto [h2, c2, g2] = run(false);
      CHECK(max_abs_diff(h1, h2) < 1e-12);
      CHECK(max_abs_diff(c1, c2) < 1e-12);
      const char* names[] = {"u", "x", "v_f", "v_r", "b_f", "b_r", "c0"};
      for (size_t i = 0; i < g1.size(); ++i) {
        INFO("gradient of " << names[i]);
        CHECK(max_abs_diff(g1[i], g2[i]) < 1e-10);
      }
    }
  }
}
