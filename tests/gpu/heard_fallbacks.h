// The GPU tests' listener of kernel fallbacks (kernels/decay/kernel_guard.h): it records what is reported while it
// lives, from fresh verdicts, and removes itself and the wrong-kernel hook however the test case ends.
#pragma once

#include <string>
#include <vector>

#include "kernels/decay/kernel_guard.h"

namespace fwlab::test {

struct HeardFallbacks {
  std::vector<std::string> heard;
  HeardFallbacks() {
    kernels::reset_kernel_verdicts();
    kernels::on_kernel_fallback(
        [this](const kernels::KernelFallback& f) { heard.push_back(f.kernel + " " + f.shape_class); });
  }
  ~HeardFallbacks() {
    kernels::on_kernel_fallback(nullptr);
    kernels::set_wrong_kernel("");
    kernels::reset_kernel_verdicts();
  }
  HeardFallbacks(const HeardFallbacks&) = delete;
  HeardFallbacks& operator=(const HeardFallbacks&) = delete;
};

}  // namespace fwlab::test
