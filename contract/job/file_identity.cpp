#include "contract/job/file_identity.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <fstream>
#include <iterator>

namespace fwlab {

namespace fs = std::filesystem;

std::string sha256_hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

std::string files_identity(const std::string& tag, const std::vector<fs::path>& files) {
  std::error_code ec;
  std::string fingerprint = tag;
  constexpr uintmax_t kHashLimit = 64u << 20;  // hash contents up to 64 MiB in all; beyond, names/sizes/mtimes
  uintmax_t total = 0;
  for (const auto& f : files) total += fs::file_size(f, ec);
  for (const auto& f : files) {
    fingerprint += fmt::format("|{}:{}", f.filename().string(), fs::file_size(f, ec));
    if (total <= kHashLimit) {
      std::ifstream in(f, std::ios::binary);
      fingerprint += fmt::format(":{}", sha256_hex(std::string((std::istreambuf_iterator<char>(in)), {})));
    } else {
      fingerprint += fmt::format(":{}", fs::last_write_time(f, ec).time_since_epoch().count());
    }
  }
  return sha256_hex(fingerprint).substr(0, 16);
}

}  // namespace fwlab
