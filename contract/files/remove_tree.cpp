#include "contract/files/remove_tree.h"

#include <ftw.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

namespace fwlab {
namespace {

// Depth first (FTW_DEPTH): a directory's entries go before the directory itself.
int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  return std::remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

}  // namespace

bool remove_tree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT;
  constexpr int kOpenDirectories = 16;  // descriptors nftw may hold at once; deeper trees just reopen
  return ::nftw(path.c_str(), remove_entry, kOpenDirectories, FTW_DEPTH | FTW_PHYS) == 0;
}

}  // namespace fwlab
