// The chunked CUDA kernel's block programs (kernels/decay/cuda/chunks.h) on the host with 8 threads per block, under
// ThreadSanitizer (ctest: kernels_host_tsan): every read of a block's shared scratch must be ordered after the write
// it reads by a barrier, as on the GPU, and TSan reports any that is not. Torch-free, so that TSan sees only this
// code. Also checks the results: the forward against a plain float64 recurrence, and every output of 8 threads
// against 1 thread bit for bit (each element is computed by one thread in one order, whichever thread it is).
#include <cmath>
#include <cstdio>
#include <vector>

#include "kernels/decay/cuda/chunks_host.h"
#include "tests/tsan/support.h"

namespace C = fwlab::cuda;

namespace {

constexpr int64_t kHeads = 2, kSteps = 2 * C::kChunk, kD = 32, kM = 16;

struct Problem {
  std::vector<double> q, k, v, dy, A, B, state0, dstate_final;
  C::ChunkProblem<double, double> view() const {
    C::ChunkProblem<double, double> p;
    p.q = q.data(), p.k = k.data(), p.v = v.data(), p.dy = dy.data(), p.A = A.data(), p.B = B.data();
    p.state0 = state0.data(), p.dstate_final = dstate_final.data();
    p.heads = kHeads, p.steps = kSteps, p.D = kD, p.M = kM, p.a_width = kD;
    return p;
  }
};

Problem random_problem() {
  fwlab::tsan::Normals fill(3);
  auto gates = [&](int64_t width) {  // log-gates summed from each chunk's start, as the binding prepares them
    std::vector<double> g(size_t(kHeads * kSteps * width));
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t t = 0; t < kSteps; ++t)
        for (int64_t j = 0; j < width; ++j) {
          const size_t at = size_t((h * kSteps + t) * width + j);
          const double log_gate = -std::log1p(std::exp(-(fill.next() + 2.0)));
          g[at] = (t % C::kChunk == 0 ? 0.0 : g[at - size_t(width)]) + log_gate;
        }
    return g;
  };
  Problem p;
  p.q = fill(kHeads * kSteps * kM, 0.25), p.k = fill(kHeads * kSteps * kM, 0.25), p.v = fill(kHeads * kSteps * kD, 1.0);
  p.dy = fill(kHeads * kSteps * kD, 1.0), p.A = gates(kD), p.B = gates(kM);
  p.state0 = fill(kHeads * kD * kM, 1.0), p.dstate_final = fill(kHeads * kD * kM, 1.0);
  return p;
}

// y_t = S_t q_t with S_t = diag(a_t) S_{t-1} diag(b_t) + v_t k_t^T, the log-gates recovered from the chunk sums;
// less the diagonal pair (q_t . k_t) v_t, which the block programs leave to their caller.
std::vector<double> naive_outputs(const Problem& p) {
  std::vector<double> y(size_t(kHeads * kSteps * kD));
  for (int64_t h = 0; h < kHeads; ++h) {
    std::vector<double> S(p.state0.begin() + h * kD * kM, p.state0.begin() + (h + 1) * kD * kM);
    for (int64_t t = 0; t < kSteps; ++t) {
      const int64_t row = h * kSteps + t;
      auto log_gate = [&](const std::vector<double>& G, int64_t width, int64_t j) {
        const double here = G[size_t(row * width + j)];
        return t % C::kChunk == 0 ? here : here - G[size_t((row - 1) * width + j)];
      };
      for (int64_t i = 0; i < kD; ++i) {
        double acc = 0;
        for (int64_t j = 0; j < kM; ++j) {
          double& s = S[size_t(i * kM + j)];
          s = std::exp(log_gate(p.A, kD, i) + log_gate(p.B, kM, j)) * s +
              p.v[size_t(row * kD + i)] * p.k[size_t(row * kM + j)];
          acc += (s - p.v[size_t(row * kD + i)] * p.k[size_t(row * kM + j)]) * p.q[size_t(row * kM + j)];
        }
        y[size_t(row * kD + i)] = acc;
      }
    }
  }
  return y;
}

struct Run {
  std::vector<double> y, states, dstates, dq, dk, dv;
};

Run run(const Problem& problem, int threads) {
  const auto p = problem.view();
  const size_t steps = size_t(kHeads * kSteps), states = size_t(kHeads * (p.chunks() + 1) * kD * kM);
  Run r{std::vector<double>(steps * kD), std::vector<double>(states),     std::vector<double>(states),
        std::vector<double>(steps * kM), std::vector<double>(steps * kM), std::vector<double>(steps * kD)};
  C::run_forward_on_host(p, r.y.data(), r.states.data(), threads);
  C::run_backward_on_host(p, r.states.data(), r.dstates.data(), r.dq.data(), r.dk.data(), r.dv.data(), threads);
  return r;
}

}  // namespace

int main() {
  fwlab::tsan::Expectations checks;
  const auto problem = random_problem();
  const auto one = run(problem, 1), eight = run(problem, 8);
  const auto y = naive_outputs(problem);
  double gap = 0, scale = 1;
  for (size_t i = 0; i < y.size(); ++i)
    gap = std::fmax(gap, std::fabs(eight.y[i] - y[i])), scale = std::fmax(scale, std::fabs(y[i]));
  std::printf("forward, 8 threads per block, against the naive recurrence: relative gap %.3g\n", gap / scale);
  checks.expect(gap / scale < 1e-10, "y == naive recurrence (float64)");
  checks.expect(one.y == eight.y && one.states == eight.states, "forward: 8 threads == 1 thread, bit for bit");
  checks.expect(one.dq == eight.dq && one.dk == eight.dk && one.dv == eight.dv && one.dstates == eight.dstates,
                "backward: 8 threads == 1 thread, bit for bit");
  return checks.finish();
}
