// The CUDA fused decay kernel on a GPU against its own row code run on the host (which tests/test_kernels.cpp
// binds to the libtorch naive twin in float64): outputs, final state and every gradient, float64 and float32,
// lengths around the 16-step segments, every gate layout, more rows than a block's threads. Exits 77 (ctest: skipped)
// with the reason when no CUDA device can be used.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/decay/cuda/fused.h"

namespace C = fwlab::cuda;

namespace {

struct Case {
  int64_t heads, steps, D, M, a_width;
  bool key_gate, state0;
};

template <typename T>
struct Device {
  T* ptr = nullptr;
  size_t n = 0;
  explicit Device(const std::vector<T>& host) : n(host.size()) {
    if (n == 0) return;
    cudaMalloc(reinterpret_cast<void**>(&ptr), n * sizeof(T));
    cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  }
  explicit Device(size_t count) : n(count) {
    if (n) cudaMalloc(reinterpret_cast<void**>(&ptr), n * sizeof(T));
  }
  ~Device() { cudaFree(ptr); }
  std::vector<T> host() const {
    std::vector<T> out(n);
    if (n) cudaMemcpy(out.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost);
    return out;
  }
};

// Largest |a - b| over the largest |b| (at least 1).
template <typename T>
double relative_gap(const std::vector<T>& a, const std::vector<double>& b) {
  double gap = 0, scale = 1;
  for (size_t i = 0; i < b.size(); ++i) {
    gap = std::max(gap, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return gap / scale;
}

int failures = 0;

template <typename T>
void run_case(const Case& c, std::mt19937& rng, double tolerance) {
  std::normal_distribution<double> normal;
  auto random = [&](size_t n, bool log_gate = false) {
    std::vector<double> x(n);
    for (auto& e : x) e = log_gate ? -std::log1p(std::exp(-(normal(rng) + 1.0))) : normal(rng);  // log sigmoid
    return x;
  };
  const size_t HT = static_cast<size_t>(c.heads * c.steps), DM = static_cast<size_t>(c.D * c.M);
  const auto q = random(HT * c.M), k = random(HT * c.M), v = random(HT * c.D), la = random(HT * c.a_width, true),
             lb = c.key_gate ? random(HT * c.M, true) : std::vector<double>{},
             s0 = c.state0 ? random(c.heads * DM) : std::vector<double>{};
  const auto dy = random(HT * c.D), ds = random(c.heads * DM);

  // The reference: the row code on the host, float64.
  C::DecayProblem<double> hp;
  hp.q = q.data(), hp.k = k.data(), hp.v = v.data(), hp.log_a = c.a_width ? la.data() : nullptr,
  hp.log_b = c.key_gate ? lb.data() : nullptr, hp.state0 = c.state0 ? s0.data() : nullptr;
  hp.heads = c.heads, hp.steps = c.steps, hp.D = c.D, hp.M = c.M, hp.a_width = c.a_width;
  std::vector<double> y(HT * c.D), S(c.heads * DM), ck(static_cast<size_t>(c.heads * hp.segments()) * DM);
  for (int64_t h = 0; h < c.heads; ++h)
    for (int64_t i = 0; i < c.D; ++i) C::decay_row_forward(hp, h, i, y.data(), S.data(), ck.data());
  std::vector<double> dq(HT * c.M, 0), dk(HT * c.M, 0), dv(HT * c.D, 0), dla(HT * c.a_width, 0), dlb(lb.size(), 0),
      dS0(c.heads * DM, 0);
  C::DecayGrads<double> hg;
  hg.dy = dy.data(), hg.dstate_final = ds.data(), hg.dq = dq.data(), hg.dk = dk.data(), hg.dv = dv.data(),
  hg.dlog_a = c.a_width ? dla.data() : nullptr, hg.dlog_b = c.key_gate ? dlb.data() : nullptr, hg.dstate0 = dS0.data();
  std::vector<double> host_workspace(size_t(hp.workspace_size()), std::nan(""));
  hg.workspace = host_workspace.data();
  for (int64_t h = 0; h < c.heads; ++h)
    for (int64_t i = 0; i < c.D; ++i) C::decay_row_backward(hp, h, i, ck.data(), hg, C::AddPlain{});

  // The GPU, in T.
  auto as = [](const std::vector<double>& x) { return std::vector<T>(x.begin(), x.end()); };
  Device<T> dq_(as(q)), dk_(as(k)), dv_(as(v)), dla_(as(la)), dlb_(as(lb)), ds0_(as(s0)), ddy(as(dy)), dds(as(ds));
  C::DecayProblem<T> p;
  p.q = dq_.ptr, p.k = dk_.ptr, p.v = dv_.ptr, p.log_a = c.a_width ? dla_.ptr : nullptr,
  p.log_b = c.key_gate ? dlb_.ptr : nullptr, p.state0 = c.state0 ? ds0_.ptr : nullptr;
  p.heads = c.heads, p.steps = c.steps, p.D = c.D, p.M = c.M, p.a_width = c.a_width;
  Device<T> gy(y.size()), gS(S.size()), gck(ck.size());
  Device<T> gdq(dq.size()), gdk(dk.size()), gdv(dv.size()), gdla(dla.size()), gdlb(dlb.size()), gdS0(dS0.size());
  C::DecayGrads<T> g;
  g.dy = ddy.ptr, g.dstate_final = dds.ptr, g.dq = gdq.ptr, g.dk = gdk.ptr, g.dv = gdv.ptr,
  g.dlog_a = c.a_width ? gdla.ptr : nullptr, g.dlog_b = c.key_gate ? gdlb.ptr : nullptr, g.dstate0 = gdS0.ptr;
  Device<T> workspace(size_t(p.workspace_size()));
  g.workspace = workspace.ptr;
  // On a stream of its own (not the legacy default one): the launches and the zeroing must all follow it.
  cudaStream_t stream = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = C::decay_fused_forward(p, gy.ptr, gS.ptr, gck.ptr, stream);
  if (e == cudaSuccess) e = C::decay_fused_backward(p, gck.ptr, g, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (stream) cudaStreamDestroy(stream);
  const std::string name = std::string(sizeof(T) == 8 ? "float64" : "float32") + " heads=" + std::to_string(c.heads) +
                           " T=" + std::to_string(c.steps) + " D=" + std::to_string(c.D) + " M=" + std::to_string(c.M) +
                           " a_width=" + std::to_string(c.a_width) + (c.key_gate ? " key gate" : "") +
                           (c.state0 ? " state0" : "");
  if (e != cudaSuccess) {
    std::printf("FAIL %s: %s\n", name.c_str(), cudaGetErrorString(e));
    ++failures;
    return;
  }
  const std::vector<std::pair<const char*, double>> gaps = {
      {"y", relative_gap(gy.host(), y)},          {"state", relative_gap(gS.host(), S)},
      {"dq", relative_gap(gdq.host(), dq)},       {"dk", relative_gap(gdk.host(), dk)},
      {"dv", relative_gap(gdv.host(), dv)},       {"dlog_a", relative_gap(gdla.host(), dla)},
      {"dlog_b", relative_gap(gdlb.host(), dlb)}, {"dstate0", relative_gap(gdS0.host(), dS0)}};
  for (const auto& [what, gap] : gaps) {
    const bool ok = gap <= tolerance;
    if (!ok) ++failures;
    std::printf("%s %s: %s relative gap %.3g (tolerance %.0e)\n", ok ? "ok  " : "FAIL", name.c_str(), what, gap,
                tolerance);
  }
}

}  // namespace

int main() {
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA device to run on (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  std::mt19937 rng(7);
  for (int64_t steps : {1, 16, 17, 53})
    for (int64_t a_width : {0, 1, 80})
      for (bool key_gate : {false, true}) {
        const Case c{3, steps, 80, 32, a_width, key_gate, steps != 16};
        run_case<double>(c, rng, 1e-10);
        run_case<float>(c, rng, 1e-4);
      }
  std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
