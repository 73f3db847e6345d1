// ctest's abi_link_check, second executable: a Catch2 test linked with tests/catch_main.cpp (the test binaries'
// main) under -D_GLIBCXX_USE_CXX11_ABI=0. Debian's Catch2::Catch2WithMain is compiled with the C++11 ABI, and a
// CHECK on std::strings then leaves Catch::StringMaker<std::string>::convert undefined.
#include <catch2/catch.hpp>
#include <string>

TEST_CASE("a std::string comparison, stringified on failure", "[abi]") {
  const std::string written = "train_loss";
  CHECK(written + "@12" == std::string("train_loss@12"));
  CHECK_THAT(written, Catch::Matchers::StartsWith("train"));
}
