// The host's stand-in for mma.sync (kernels/cuda/warp_mma.h): the std::threads that emulate a block
// (kernels/decay/cuda/chunks_host.h) meet per warp of 32, post their fragments, and each computes its own elements of
// D from the whole A and B rebuilt through the PTX layout functions, so a lane gets what the hardware would give
// it. The products are summed in double and rounded to the caller's accumulation type once per instruction, as the
// hardware rounds to fp32 once per instruction. Tests only.
#pragma once

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/cuda/host_barrier.h"
#include "kernels/cuda/warp_mma.h"

namespace fwlab::cuda {

class HostWarps {
 public:
  explicit HostWarps(int threads) {
    for (int first = 0; first + kWarp <= threads; first += kWarp) warps_.push_back(std::make_unique<Warp>());
  }

  // BlockCtx::host_mma: c (this lane's four elements of C) += the warp's A B.
  static void mma(void* self, int tid, const double* a, const double* b, double* c) {
    auto& w = *static_cast<HostWarps*>(self)->warps_.at(size_t(tid / kWarp));
    const int lane = tid % kWarp;
    for (int i = 0; i < 8; ++i) w.a[lane][i] = a[i];
    for (int i = 0; i < 4; ++i) w.b[lane][i] = b[i];
    w.barrier.wait();            // every lane's fragments posted
    double A[16][16], B[16][8];  // NaN where no lane's fragment lands: a layout with a gap fails
    std::fill(&A[0][0], &A[0][0] + 16 * 16, std::numeric_limits<double>::quiet_NaN());
    std::fill(&B[0][0], &B[0][0] + 16 * 8, std::numeric_limits<double>::quiet_NaN());
    for (int l = 0; l < kWarp; ++l) {
      for (int i = 0; i < 8; ++i) A[mma_a_row(l, i)][mma_a_col(l, i)] = w.a[l][i];
      for (int i = 0; i < 4; ++i) B[mma_b_row(l, i)][mma_b_col(l, i)] = w.b[l][i];
    }
    w.barrier.wait();  // every lane has read them: the slots may be posted to again
    for (int i = 0; i < 4; ++i) {
      double sum = 0;
      for (int k = 0; k < 16; ++k) sum += A[mma_c_row(lane, i)][k] * B[k][mma_c_col(lane, i)];
      c[i] += sum;
    }
  }

 private:
  struct Warp {
    HostBarrier barrier{kWarp};
    double a[kWarp][8], b[kWarp][4];
  };
  std::vector<std::unique_ptr<Warp>> warps_;
};

}  // namespace fwlab::cuda
