// Reading job.json's objects with errors that name the key path ("optim.lr: must be positive, got -1"); shared
// by the job spec and its task specs.
#pragma once

#include <fmt/format.h>

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "contract/job/did_you_mean.h"
#include "contract/model/model_config.h"

namespace fwlab::spec_reader {

using SpecError = ConfigError;

// Reads one JSON object, remembering which keys were used so that the rest can be reported as unknown.
class Reader {
 public:
  Reader(const nlohmann::json& j, std::string prefix) : j_(j), prefix_(std::move(prefix)) {
    if (!j_.is_object())
      throw SpecError(prefix_.empty() ? "job" : prefix_.substr(0, prefix_.size() - 1), "must be an object");
  }

  template <typename T>
  void get(const std::string& key, T& out) {
    known_.insert(key);
    if (!j_.contains(key)) return;
    const auto& v = j_.at(key);
    const auto field = prefix_ + key;
    if constexpr (std::is_same_v<T, std::string>) {
      if (!v.is_string()) throw SpecError(field, fmt::format("must be a string, got {}", v.dump()));
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean()) throw SpecError(field, fmt::format("must be true or false, got {}", v.dump()));
    } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
      if (!v.is_array()) throw SpecError(field, fmt::format("must be a list of integers, got {}", v.dump()));
      for (const auto& e : v)
        if (!e.is_number_integer()) throw SpecError(field, fmt::format("must be a list of integers, got {}", v.dump()));
    } else if constexpr (std::is_integral_v<T>) {
      if (!v.is_number_integer()) throw SpecError(field, fmt::format("must be an integer, got {}", v.dump()));
      if (std::is_unsigned_v<T> && v.get<int64_t>() < 0)
        throw SpecError(field, fmt::format("must be >= 0, got {}", v.dump()));
    } else {
      if (!v.is_number()) throw SpecError(field, fmt::format("must be a number, got {}", v.dump()));
    }
    out = v.get<T>();
  }

  Reader sub(const std::string& key) {
    known_.insert(key);
    static const nlohmann::json empty = nlohmann::json::object();
    return Reader(j_.contains(key) ? j_.at(key) : empty, prefix_ + key + ".");
  }

  const nlohmann::json* raw(const std::string& key) {
    known_.insert(key);
    return j_.contains(key) ? &j_.at(key) : nullptr;
  }

  void reject_unknown() const {
    for (const auto& [key, value] : j_.items()) {
      if (known_.count(key)) continue;
      throw SpecError(prefix_ + key,
                      "unknown key" + did_you_mean(key, std::vector<std::string>(known_.begin(), known_.end())));
    }
  }

  std::string field(const std::string& key) const { return prefix_ + key; }
  bool has(const std::string& key) const { return j_.contains(key); }
  const nlohmann::json& json() const { return j_; }

 private:
  const nlohmann::json& j_;
  std::string prefix_;
  std::set<std::string> known_;
};

inline void require(bool ok, const std::string& field, const std::string& message) {
  if (!ok) throw SpecError(field, message);
}

// Sizes far beyond any job (a typo'd exponent) are refused before anything is allocated.
inline void at_most(int64_t v, int64_t limit, const std::string& field) {
  require(v <= limit, field, fmt::format("{} is beyond what fwlab supports (at most {})", v, limit));
}

inline void one_of(const std::string& v, const std::vector<std::string>& allowed, const std::string& field) {
  for (const auto& a : allowed)
    if (v == a) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw SpecError(field, fmt::format("'{}' is not one of {}", v, list));
}

inline void one_of(const std::string& v, std::initializer_list<const char*> allowed, const std::string& field) {
  one_of(v, std::vector<std::string>(allowed.begin(), allowed.end()), field);
}

}  // namespace fwlab::spec_reader
