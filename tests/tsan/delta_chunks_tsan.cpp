// The delta family's chunked block programs (kernels/delta/cuda/chunks.h) and their tensor-core twins
// (chunks_mma.h, chunk_gradients_mma.h, through the host's warp emulation) under ThreadSanitizer (ctest:
// kernels_delta_tsan): every read of a block's shared scratch, and of what other warps wrote, must be ordered after
// the write by a barrier, as on the GPU. Also checks the results: the plain programs with 8 threads per block
// against 1 thread bit for bit, and the tensor-core programs with two warps against them in float64.
#include <cmath>
#include <cstdio>
#include <vector>

#include "kernels/delta/cuda/chunks_host.h"
#include "tests/tsan/support.h"

namespace C = fwlab::cuda;

namespace {

constexpr int64_t kHeads = 1, kSteps = 2 * C::kChunk, kD = 24, kM = 16;

struct Inputs {
  std::vector<double> q, k, v, dy, beta, log_alpha, state0, dstate_final;
};

Inputs random_inputs() {
  fwlab::tsan::Normals fill(5);
  Inputs in{fill(kHeads * kSteps * kM, 0.25),
            fill(kHeads * kSteps * kM, 0.25),
            fill(kHeads * kSteps * kD, 1.0),
            fill(kHeads * kSteps * kD, 1.0),
            {},
            {},
            fill(kHeads * kD * kM, 1.0),
            fill(kHeads * kD * kM, 1.0)};
  for (int64_t t = 0; t < kHeads * kSteps; ++t) {
    in.beta.push_back(1 / (1 + std::exp(-fill.next())));
    in.log_alpha.push_back(-std::log1p(std::exp(-(fill.next() + 2.0))));
  }
  return in;
}

struct Run {
  std::vector<double> y, states, dstates, dq, dk, dv, dbeta, dlog_alpha;
};

Run run(const Inputs& in, int threads, bool tensor_cores) {
  const size_t steps = size_t(kHeads * kSteps), states = size_t(kHeads * 3 * kD * kM);
  std::vector<double> g(steps), W(steps * kM), U(steps * kD), u(steps * kD), du(steps * kD);
  C::delta::Problem<double, double> p;
  p.q = in.q.data(), p.k = in.k.data(), p.v = in.v.data(), p.dy = in.dy.data(), p.beta = in.beta.data();
  p.log_alpha = in.log_alpha.data(), p.state0 = in.state0.data(), p.dstate_final = in.dstate_final.data();
  p.g = g.data(), p.W = W.data(), p.U = U.data(), p.u = u.data(), p.du = du.data();
  p.heads = kHeads, p.steps = kSteps, p.D = kD, p.M = kM;
  Run r{std::vector<double>(steps * kD), std::vector<double>(states),     std::vector<double>(states),
        std::vector<double>(steps * kM), std::vector<double>(steps * kM), std::vector<double>(steps * kD),
        std::vector<double>(steps),      std::vector<double>(steps)};
  C::delta::forward_on_host(p, r.y.data(), r.states.data(), threads, tensor_cores);
  const C::delta::Gradients<double> out{r.dq.data(), r.dk.data(), r.dv.data(), r.dbeta.data(), r.dlog_alpha.data()};
  C::delta::backward_on_host(p, r.states.data(), r.dstates.data(), out, threads, tensor_cores);
  return r;
}

double gap(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0, scale = 1e-6;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::fmax(worst, std::isnan(a[i]) ? INFINITY : std::fabs(a[i] - b[i])),
    scale = std::fmax(scale, std::fabs(b[i]));
  return worst / scale;
}

}  // namespace

int main() {
  fwlab::tsan::Expectations checks;
  const auto in = random_inputs();
  const auto one = run(in, 1, false), eight = run(in, 8, false), warps = run(in, 64, true);
  checks.expect(one.y == eight.y && one.states == eight.states, "forward: 8 threads == 1 thread, bit for bit");
  checks.expect(one.dq == eight.dq && one.dk == eight.dk && one.dv == eight.dv && one.dbeta == eight.dbeta &&
                    one.dlog_alpha == eight.dlog_alpha && one.dstates == eight.dstates,
                "backward: 8 threads == 1 thread, bit for bit");
  double worst = 0;
  using Field = std::vector<double> Run::*;
  for (const Field field : {&Run::y, &Run::dq, &Run::dk, &Run::dv, &Run::dbeta, &Run::dlog_alpha, &Run::dstates})
    worst = std::fmax(worst, gap(warps.*field, one.*field));
  std::printf("tensor-core programs (two warps) against the plain ones: worst relative gap %.3g\n", worst);
  checks.expect(worst < 1e-10, "tensor-core programs == plain programs (float64)");
  return checks.finish();
}
