// Catch2's main for the test binaries, compiled here rather than taken from Debian's libCatch2WithMain.a: that
// archive is compiled C++ with the C++11 string ABI, which a PyTorch wheel before 2.7 (and so this tree) does not
// use (the ABI note in the top CMakeLists.txt).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
