#include "kernels/blas_core.h"

#include <dlfcn.h>
#include <unistd.h>

#include <strings.h>

#include <cstdlib>
#include <fstream>
#include <vector>

namespace fwlab {

std::string blas_core() {
  using CoreName = char* (*)();
  const auto name = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return name ? std::string(name()) : std::string();
}

namespace {

// The fastest core OpenBLAS has for this CPU's features, or nullptr when none beats its own choice.
const char* core_for_features() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

}  // namespace

std::string use_the_cpus_blas_kernels() {
  const auto core = blas_core();
  if (std::getenv("OPENBLAS_CORETYPE")) return core;  // chosen by the user, or by the exec below
  if (core.empty() || strcasecmp(core.c_str(), "Prescott") != 0) return core;
  const char* better = core_for_features();
  if (!better) return core;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string arg; std::getline(in, arg, '\0');) args.push_back(arg);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  setenv("OPENBLAS_CORETYPE", better, 1);
  if (!args.empty()) execv("/proc/self/exe", argv.data());  // returns only on failure: the slower kernels then
  unsetenv("OPENBLAS_CORETYPE");
  return core;
}

}  // namespace fwlab
