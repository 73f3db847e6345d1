// fwlab-worker doctor (and `fwlab doctor`): what a user on a new machine runs first. It prints the device, the
// libtorch, CUDA and driver versions and the architectures the CUDA kernels were built for, then runs every custom
// decay kernel against libtorch's chunked form on the same device (kernels/decay/kernel_check.h): forward and every
// gradient, fp32 / bf16 / fp16, T off the chunk size, D = M = 64 and 128, strong and no decay, with the largest
// error and the milliseconds of both. Without a GPU it says so and checks the host paths instead.
#pragma once

#include <string>

namespace fwlab {

struct DoctorOptions {
  bool quick = false;        // smaller inputs (the tests' run)
  std::string wrong_kernel;  // test hook: that kernel's results come out wrong (kernels/decay/kernel_guard.h)
  int threads = 0;           // CPU threads (0: all cores)
};

// 0 when every check passes, 1 otherwise.
int run_doctor(const DoctorOptions& options);

}  // namespace fwlab
