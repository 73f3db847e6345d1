// Content identities of files, shared by the harness (job identities) and the worker (its tokenization cache).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace fwlab {

// Hex SHA-256 of a string (OpenSSL).
std::string sha256_hex(const std::string& data);
// Identity of a set of files: `tag`, names and sizes, and their content hash (size/mtime beyond 64 MiB in all).
std::string files_identity(const std::string& tag, const std::vector<std::filesystem::path>& files);

}  // namespace fwlab
