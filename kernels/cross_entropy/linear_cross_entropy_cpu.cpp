#include "kernels/cross_entropy/linear_cross_entropy_cpu.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "kernels/common/cpu_blas.h"
#include "kernels/common/small_gemm_cpu.h"
#include "kernels/cross_entropy/cross_entropy_cpu.h"

namespace fwlab::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows a block: as many as keep its logits and their gradient (two buffers of rows x V) within 16 MB, at most 256.
// Its products go to the BLAS, which packs its operands once a call: measured on the two-core AVX2 EPYC (Zoology's
// MQAR model, a thousand labelled rows a step on average, V = 8,192), blocks of 32 rows were no faster than libtorch's
// unfused form, 128 rows took 14-20 % less time, 256 rows 18-27 % less (whole steps, deltanet and softmax);
// small_gemm's register tiles (read in place, no packing) lost at every size, their operands here being far from the L1
// cache.
constexpr int64_t kBlockFloats = int64_t{1} << 21, kMaxRowBlock = 256, kMinRowBlock = 8;
int64_t row_block(int64_t V) { return std::clamp(kBlockFloats / V, kMinRowBlock, kMaxRowBlock); }

// C = op(A) op(B) + beta C, row-major: the BLAS libtorch loaded, or the tiles (or their twin) without one.
template <typename T>
void product(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
             T beta, T* c, int64_t ldc) {
  if (blas::available()) return blas::gemm<T>(ta, tb, m, n, k, T(1), a, lda, b, ldb, beta, c, ldc);
  small_gemm<T>(ta, tb, m, n, k, T(1), a, lda, b, ldb, beta, c, ldc);
}

// The operands of one call, raw.
template <typename T>
struct Operands {
  const T* x;        // [N, D]
  const T* w;        // [V, D]
  const T* wt;       // W^T [D, V]: the logits' product reads it row by row
  const int64_t* t;  // [N]
  int64_t N, D, V;
};

// One block of rows [r0, r0 + rows): its summed loss; with gradients, dL/dx of its rows into gx and its share of
// dL/dW added to gw (a buffer of the thread's own).
template <typename T>
double block(const Operands<T>& o, int64_t r0, int64_t rows, T* logits, T* g, T* gx, T* gw) {
  product<T>(false, false, rows, o.V, o.D, o.x + r0 * o.D, o.D, o.wt, o.V, T(0), logits, o.V);
  const T inv_n = T(1) / static_cast<T>(o.N);
  double loss = 0;
  for (int64_t r = 0; r < rows; ++r) loss += cross_entropy_row(logits + r * o.V, g + r * o.V, o.V, o.t[r0 + r], inv_n);
  if (gx) {
    product<T>(false, false, rows, o.D, o.V, g, o.V, o.w, o.D, T(0), gx + r0 * o.D, o.D);
    product<T>(true, false, o.V, o.D, rows, g, o.V, o.x + r0 * o.D, o.D, T(1), gw, o.D);
  }
  return loss;
}

// Every block, over libtorch's threads; each thread adds its blocks' dL/dW into a buffer of its own, summed after.
template <typename T>
double all_blocks(const Operands<T>& o, T* gx, torch::Tensor& gw) {
  const int64_t rows_a_block = row_block(o.V), blocks = (o.N + rows_a_block - 1) / rows_a_block;
  const int threads = at::get_num_threads();
  auto partial = gx ? torch::zeros({threads, o.V, o.D}, gw.options()) : torch::Tensor();
  std::vector<double> losses(blocks, 0.0);
  at::parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> scratch(2 * rows_a_block * o.V);
    T* mine = gx ? partial[at::get_thread_num()].template data_ptr<T>() : nullptr;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * rows_a_block, rows = std::min(rows_a_block, o.N - r0);
      losses[b] = block(o, r0, rows, scratch.data(), scratch.data() + rows_a_block * o.V, gx, mine);
    }
  });
  if (gx) gw.copy_(threads == 1 ? partial[0] : partial.sum(0));
  double total = 0;
  for (double l : losses) total += l;  // in block order: the same sum whatever the thread count
  return total;
}

struct LinearCrossEntropyMean : public torch::autograd::Function<LinearCrossEntropyMean> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& w_in,
                               const torch::Tensor& targets) {
    const auto x = x_in.contiguous(), w = w_in.contiguous(), wt = w_in.t().contiguous();
    const auto t = targets.to(torch::kLong).contiguous();
    const int64_t N = x.size(0), D = x.size(1), V = w.size(0);
    const auto* pt = t.data_ptr<int64_t>();
    for (int64_t i = 0; i < N; ++i)
      TORCH_CHECK(pt[i] >= 0 && pt[i] < V,
                  fmt::format("linear_cross_entropy_mean: target {} of row {} is no class of {}", pt[i], i, V));
    const bool grads = x_in.requires_grad() || w_in.requires_grad();
    auto gx = grads ? torch::empty_like(x) : torch::Tensor(), gw = grads ? torch::empty_like(w) : torch::Tensor();
    double loss = 0;
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "linear_cross_entropy_mean", [&] {
      const Operands<scalar_t> o{x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), wt.data_ptr<scalar_t>(), pt, N, D, V};
      loss = all_blocks<scalar_t>(o, grads ? gx.data_ptr<scalar_t>() : nullptr, gw);
    });
    ctx->save_for_backward({gx, gw});
    return {torch::tensor(loss / static_cast<double>(N), torch::kDouble).to(x.scalar_type())};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    // A loss backpropagated as it is (the usual case) takes the kept gradients as they are.
    if (grads[0].numel() == 1 && grads[0].item<double>() == 1.0) return {saved[0], saved[1], torch::Tensor()};
    return {saved[0] * grads[0], saved[1] * grads[0], torch::Tensor()};
  }
};

}  // namespace

bool linear_cross_entropy_loop_applies(const torch::Tensor& x, const torch::Tensor& weight) {
  const auto dtype = x.scalar_type();
  return x.device().is_cpu() && weight.device().is_cpu() && x.dim() == 2 && weight.dim() == 2 && x.size(0) > 0 &&
         x.size(1) == weight.size(1) && weight.scalar_type() == dtype &&
         (dtype == torch::kFloat || dtype == torch::kDouble) && !at::autocast::is_cpu_enabled();
}

torch::Tensor linear_cross_entropy_mean(const torch::Tensor& x, const torch::Tensor& weight,
                                        const torch::Tensor& targets) {
  if (!linear_cross_entropy_loop_applies(x, weight))
    return torch::nn::functional::cross_entropy(torch::linear(x, weight), targets);
  return LinearCrossEntropyMean::apply(x, weight, targets)[0];
}

}  // namespace fwlab::kernels
