// One fuzz target per parser. Built with clang's libFuzzer (scripts/fuzz.sh, under AddressSanitizer and
// UBSan), FWLAB_FUZZ_TARGET(name) is the libFuzzer entry point; built into the ordinary test binary it is a
// plain function `fuzz_name`, which tests/test_fuzz_regressions.cpp runs on every seed and every input that
// once crashed (tests/fuzz/corpus/NAME, tests/fuzz/regressions/NAME).
//
// A target returns normally for any input: the parser's documented errors are caught inside; anything else
// (another exception, a crash, a sanitizer report) is a bug.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#ifdef FWLAB_FUZZ_LIBFUZZER
#define FWLAB_FUZZ_TARGET(name) extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
#else
#define FWLAB_FUZZ_TARGET(name) int fuzz_##name(const uint8_t* data, size_t size)
#endif

namespace fwlab::fuzz {

// A file of this process holding `content` (parsers that take paths read it); the same path every call.
std::string scratch_file(const std::string& tag, const uint8_t* data, size_t size);

// A folder of this process (emptied first), for parsers that read a directory; the same path every call.
std::string scratch_dir(const std::string& tag);
// `content` written to `path`.
void write_file(const std::string& path, const uint8_t* data, size_t size);
// The input cut at its first NUL byte: the files of a parser that reads two (the second empty when there is none).
std::pair<std::string, std::string> split_at_nul(const uint8_t* data, size_t size);

// A property of the parser's output does not hold: abort, so that the fuzzer keeps the input.
[[noreturn]] void violated(const std::string& what);

}  // namespace fwlab::fuzz
