#include "harness/experiment.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <functional>
#include <regex>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

// toml++ 3.3 asserts what its own callers do not guarantee: parse_key() assumes a key character after a table
// header's '[', so "[!a]" or a NUL there aborts a build without NDEBUG (the fuzzing tree) and is __builtin_assume
// under clang with it. The code after the assertion reports the error ("expected bare key starting character"),
// as GCC's release build shows, so the assertions are off here in every build.
#ifndef NDEBUG
#define TOML_ASSERT(expr) static_cast<void>(0)
#endif
#include <toml++/toml.h>

namespace fwlab {

std::string SourcePos::str() const { return label.empty() ? fmt::format("{}:{}:{}", file, line, column) : label; }

const std::map<std::string, std::string>& key_aliases() {
  static const std::map<std::string, std::string> aliases = {
      {"mixer", "model.mixer.kind"},
      {"rule", "model.mixer.rule"},
      {"feature_map", "model.mixer.feature_map"},
      {"norm", "model.mixer.norm"},
      {"key_norm", "model.mixer.key_norm"},
      {"m", "model.mixer.m"},
      {"window", "model.mixer.window"},
      {"dpfp_nu", "model.mixer.dpfp_nu"},
      {"chunk", "model.mixer.chunk"},
      {"conv", "model.mixer.conv"},
      {"beta_init", "model.mixer.beta_init"},
      {"gate_init", "model.mixer.gate_init"},
      {"out_norm", "model.mixer.out_norm"},
      {"attention_every", "model.attention_every"},
      {"keep_softmax_every", "model.keep_softmax_every"},
      {"keep_softmax_layers", "model.keep_softmax_layers"},
      {"base_conv_layers", "model.base_conv_layers"},
      {"vocab", "model.vocab"},
      {"d_model", "model.d_model"},
      {"n_layers", "model.n_layers"},
      {"n_heads", "model.n_heads"},
      {"head_dim", "model.head_dim"},
      {"context", "model.context"},
      {"dropout", "model.dropout"},
      {"lr", "optim.lr"},
      {"min_lr", "optim.min_lr"},
      {"warmup_steps", "optim.warmup_steps"},
      {"weight_decay", "optim.weight_decay"},
      {"grad_clip", "optim.grad_clip"},
      {"steps", "train.steps"},
      {"batch_size", "train.batch_size"},
      {"seq_len", "train.seq_len"},
      {"eval_every", "eval.every"},
      {"data", "data.source"},
      {"tokenizer", "data.tokenizer"},
      {"seed", "seed"},
      {"kind", "kind"},
      {"seq_lens", "bench.seq_lens"},
      {"cross", "model.cross"},
      {"encoder", "model.encoder"},
      {"d_ff", "model.d_ff"},
  };
  return aliases;
}

namespace {

constexpr uintmax_t kMaxExperimentBytes = 16u << 20;
const std::set<std::string> kJobSections = {"model",     "data",       "optim", "train", "eval",  "transfer",
                                            "attention", "divergence", "bench", "debug", "tasks", "translate"};
const std::set<std::string> kJobScalars = {"kind", "seed", "threads", "device", "kernel_check", "init_checkpoint"};
// The sections a --set or profile key may start with (the rest of a --set key is a job key).
const std::set<std::string> kFileSections = {"defaults", "stage",  "grid",     "preset", "experiment",
                                             "table",    "tables", "executor", "derive"};
const std::set<std::string> kTopSections = {"experiment",     "defaults", "stage",  "grid",    "axis",  "preset",
                                            "not_applicable", "exclude",  "cell",   "profile", "table", "plot",
                                            "published",      "executor", "derive", "tables"};

class Parser {
 public:
  explicit Parser(std::string file) : file_(std::move(file)) {}

  SourcePos pos(const toml::node& n) const {
    if (auto it = moved_.find(&n); it != moved_.end()) return it->second;
    const auto& b = n.source().begin;
    return {file_, static_cast<int64_t>(b.line), static_cast<int64_t>(b.column), {}};
  }

  [[noreturn]] void fail(const toml::node& n, const std::string& key, const std::string& message) const {
    throw ExperimentError(fmt::format("{}: {}: {}", pos(n).str(), key, message));
  }

  nlohmann::json to_json(const toml::node& n, const std::string& key) const {
    if (auto v = n.as_integer()) return v->get();
    if (auto v = n.as_floating_point()) return v->get();
    if (auto v = n.as_boolean()) return v->get();
    if (auto v = n.as_string()) return v->get();
    if (auto a = n.as_array()) {
      auto out = nlohmann::json::array();
      for (const auto& e : *a) out.push_back(to_json(e, key));
      return out;
    }
    if (auto t = n.as_table()) {
      auto out = nlohmann::json::object();
      for (const auto& [k, v] : *t) out[std::string(k.str())] = to_json(v, key + "." + std::string(k.str()));
      return out;
    }
    fail(n, key, "dates and times are not job values");
  }

  // Flattens a table of job settings: nested job sections, dotted keys and short aliases.
  void flatten(const toml::table& t, const std::string& prefix, const std::string& where, Settings& out,
               const std::set<std::string>& skip = {}) const {
    for (const auto& [k, node] : t) {
      const std::string key(k.str());
      if (prefix.empty() && skip.count(key)) continue;
      const std::string shown = where + "." + key;
      std::string path;
      if (!prefix.empty()) {
        path = prefix + "." + key;
      } else if (node.is_table() && kJobSections.count(key)) {  // data = {source = ...}: the section, not the alias
        path = key;
      } else if (key_aliases().count(key)) {
        path = key_aliases().at(key);
      } else if (kJobSections.count(key) || kJobScalars.count(key)) {
        path = key;
      } else if (auto dot = key.find('.'); dot != std::string::npos && kJobSections.count(key.substr(0, dot))) {
        path = key;
      } else {
        std::vector<std::string> known(kJobSections.begin(), kJobSections.end());
        known.insert(known.end(), kJobScalars.begin(), kJobScalars.end());
        for (const auto& [a, target] : key_aliases()) known.push_back(a);
        known.insert(known.end(), skip.begin(), skip.end());
        fail(node, shown, "unknown key" + did_you_mean(key, known));
      }
      if (node.is_table() && kJobSections.count(path.substr(0, path.find('.')))) {
        // model.mixer stays an object only when given whole; nested tables flatten further.
        flatten(*node.as_table(), path, shown, out);
        continue;
      }
      out[path] = Setting{to_json(node, shown), pos(node), shown};
    }
  }

  const std::string& file() const { return file_; }

  toml::table& hold() { return held_.emplace_back(); }

  // Gives `n` (and everything inside it) a position outside the file.
  void label(const toml::node& n, const SourcePos& where) {
    moved_[&n] = where;
    if (auto* a = n.as_array())
      for (const auto& e : *a) label(e, where);
    if (auto* t = n.as_table())
      for (const auto& [k, v] : *t) label(v, where);
  }

  // A value a profile copied into the document has no source position of its own: errors about it name the
  // profile's line. `copy` mirrors `original` node for node.
  void copied(const toml::node& copy, const toml::node& original) const {
    moved_[&copy] = pos(original);
    if (auto* a = copy.as_array())
      for (size_t i = 0; i < a->size(); ++i) copied(*a->get(i), *original.as_array()->get(i));
    if (auto* t = copy.as_table())
      for (const auto& [k, v] : *t) copied(v, *original.as_table()->get(k.str()));
  }

 private:
  std::string file_;
  mutable std::unordered_map<const toml::node*, SourcePos> moved_;
  std::deque<toml::table> held_;  // values from outside the file (--set)
};

// Replaces the value at dotted `path` of the document (a profile key or a --set), creating tables on the way
// but never a stage or preset the file does not define. `value`'s position is what errors name.
void set_document_path(toml::table& doc, const std::string& path, const toml::node& value, const std::string& shown,
                       const Parser& p) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    auto dot = path.find('.', start);
    parts.push_back(path.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (parts.size() < 2 || !kFileSections.count(parts[0]))
    p.fail(value, shown,
           "a key is a dotted path into the file, starting with defaults, stage, grid, preset, table or executor, "
           "or a job key such as optim.lr");
  toml::table* t = &doc;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    auto* next = (*t)[parts[i]].as_table();
    if (!next) {
      if ((parts[0] == "stage" && i == 1) || (parts[0] == "preset" && i <= 2))
        p.fail(value, shown,
               fmt::format("'{}' is not defined in the file",
                           fmt::join(parts.begin(), parts.begin() + static_cast<long>(i) + 1, ".")));
      t->insert_or_assign(parts[i], toml::table{});
      next = (*t)[parts[i]].as_table();
    }
    t = next;
  }
  t->insert_or_assign(parts.back(), value);
  p.copied(*t->get(parts.back()), value);
}

// Applies `[profile.NAME]`: each key is a dotted path into the document whose value it replaces.
void apply_profile(toml::table& doc, const std::string& profile, const Parser& p) {
  auto* profiles = doc["profile"].as_table();
  std::vector<std::string> names;
  if (profiles)
    for (const auto& [k, v] : *profiles) names.emplace_back(k.str());
  if (profile.empty()) return;
  auto* chosen = profiles ? (*profiles)[profile].as_table() : nullptr;
  if (!chosen) {
    std::string list = names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "));
    throw ExperimentError(fmt::format("{}:1:1: --profile {}: no such profile (defined: {}){}", p.file(), profile, list,
                                      did_you_mean(profile, names)));
  }
  for (const auto& [k, value] : *chosen)
    set_document_path(doc, std::string(k.str()), value, fmt::format("profile.{}.\"{}\"", profile, k.str()), p);
}

// A --set key that names a job key (optim.lr, lr, seed) rather than a place in the file.
bool is_job_key(const std::string& key) {
  const auto head = key.substr(0, key.find('.'));
  if (kFileSections.count(head)) return false;
  return kJobSections.count(head) || kJobScalars.count(key) || key_aliases().count(key);
}

// `--set KEY=VALUE`, after the profile. VALUE is read as TOML (numbers, booleans, quoted strings, arrays, inline
// tables); anything that is not a TOML value is taken as a bare string, so paths need no quotes.
void apply_sets(toml::table& doc, const std::vector<std::string>& sets, Parser& p, Experiment& ex) {
  for (const auto& set : sets) {
    const auto eq = set.find('=');
    const std::string label = fmt::format("--set {}", set);
    if (eq == std::string::npos || eq == 0)
      throw ExperimentError(fmt::format("{}: expected KEY=VALUE (e.g. defaults.data.path=/data/pile)", label));
    const std::string key = set.substr(0, eq), text = set.substr(eq + 1);
    toml::table& holder = p.hold();  // the parsed value lives as long as the parser: positions are keyed by node
    try {
      holder = toml::parse("v = " + text);
    } catch (const toml::parse_error&) {
      holder.insert("v", text);
    }
    const toml::node& value = *holder.get("v");
    p.label(value, SourcePos{p.file(), 0, 0, label});
    if (is_job_key(key)) {
      toml::table one;
      one.insert_or_assign(key, value);
      p.copied(*one.get(key), value);
      p.flatten(one, "", "--set", ex.job_sets);
      for (auto& [path, setting] : ex.job_sets)  // "--set.optim.lr" -> "--set optim.lr", as the user typed it
        if (setting.written_as.rfind("--set.", 0) == 0) setting.written_as[5] = ' ';
      continue;
    }
    set_document_path(doc, key, value, key, p);
  }
}

std::vector<std::string> string_list(const toml::node& n, const std::string& key, const Parser& p) {
  std::vector<std::string> out;
  const auto* a = n.as_array();
  if (!a) p.fail(n, key, "must be a list of names");
  for (const auto& e : *a) {
    if (!e.is_string()) p.fail(e, key, "must be a list of names");
    out.push_back(*e.value<std::string>());
  }
  return out;
}

CellRule read_rule(const toml::table& t, const std::string& where, const Experiment& ex, const Parser& p, bool extra) {
  CellRule r;
  r.pos = p.pos(t);
  std::set<std::string> axis_names;
  for (const auto& a : ex.axes) axis_names.insert(a.name);
  Settings rest;
  for (const auto& [k, v] : t) {
    const std::string key(k.str());
    if (key == "stage") {
      if (!v.is_string()) p.fail(v, where + ".stage", "must be a stage name");
      r.stage = *v.value<std::string>();
      continue;
    }
    if (axis_names.count(key)) {
      r.match[key] = p.to_json(v, where + "." + key);
      continue;
    }
    if (!extra) {
      std::vector<std::string> known(axis_names.begin(), axis_names.end());
      known.push_back("stage");
      p.fail(v, where + "." + key, "is not an axis of the grid" + did_you_mean(key, known));
    }
  }
  if (extra)
    p.flatten(t, "", where, r.settings, [&] {
      auto s = axis_names;
      s.insert("stage");
      return s;
    }());
  if (!extra && r.match.empty()) p.fail(t, where, "names no axis value; it would match every cell");
  return r;
}

}  // namespace

namespace {

// A job key set on the command line that an axis of the grid varies would make every cell of the axis one job:
// the subset is asked for with --set grid.AXIS=[...].
void check_job_sets_against_grid(const Experiment& ex) {
  for (const auto& [path, setting] : ex.job_sets)
    for (const auto& a : ex.axes) {
      bool varies = a.key == path;
      if (auto presets = ex.presets.find(a.name); presets != ex.presets.end())
        for (const auto& [value, settings] : presets->second) varies = varies || settings.count(path);
      if (varies)
        throw ExperimentError(
            fmt::format("{}: the grid's axis '{}' varies {}: choose its values with --set grid.{}=[...]",
                        setting.written_as, a.name, path, a.name));
    }
}

// Each axis's values as the file wrote them (before the profile and --set replace any); dates are left for the
// grid's own check to refuse.
std::map<std::string, std::vector<nlohmann::json>> written_axis_values(const toml::table& doc, const Parser& p) {
  std::map<std::string, std::vector<nlohmann::json>> out;
  if (const auto* g = doc["grid"].as_table())
    for (const auto& [k, v] : *g)
      if (const auto* values = v.as_array())
        for (const auto& e : *values)
          if (!e.is_date() && !e.is_time() && !e.is_date_time())
            out[std::string(k.str())].push_back(p.to_json(e, "grid"));
  return out;
}

// A rule naming an axis value that the file's grid has and the profile's or --set's subset left out.
bool about_left_out_value(const CellRule& r, const Experiment& ex) {
  for (const auto& match : r.match) {  // not a structured binding: clang 14 cannot capture one in the lambda
    const auto& axis = match.first;
    const auto& value = match.second;
    const auto& a = *std::find_if(ex.axes.begin(), ex.axes.end(), [&](const Axis& x) { return x.name == axis; });
    const auto written = ex.written_axes.find(axis);
    if (std::find(a.values.begin(), a.values.end(), value) == a.values.end() && written != ex.written_axes.end() &&
        std::find(written->second.begin(), written->second.end(), value) != written->second.end())
      return true;
  }
  return false;
}

// A value Slurm takes as written must look like one: no spaces, no shell, nothing sbatch would read as an option.
void check_pattern(const toml::node& n, const std::string& key, const std::string& value, const char* pattern,
                   const char* form, const Parser& p) {
  if (!std::regex_match(value, std::regex(pattern))) p.fail(n, key, fmt::format("'{}' is not {}", value, form));
}

ExecutorSpec parse_executor(const toml::node& node, const Parser& p) {
  if (!node.is_table()) p.fail(node, "executor", "must be a table ([executor])");
  ExecutorSpec e;
  static const std::vector<std::string> kKeys = {"kind", "partition", "time", "mem",         "gres",          "account",
                                                 "qos",  "cpus",      "gpus", "array_limit", "signal_before", "extra"};
  for (const auto& entry : *node.as_table()) {  // not structured bindings: clang 14 cannot capture those in lambdas
    const toml::node& v = entry.second;
    const std::string key(entry.first.str()), shown = "executor." + key;
    e.pos[key] = p.pos(v);
    auto text = [&]() {
      if (!v.is_string()) p.fail(v, shown, "must be a string");
      return v.as_string()->get();
    };
    auto integer = [&](int64_t lo, int64_t hi) {
      if (!v.is_integer()) p.fail(v, shown, "must be an integer");
      const auto x = v.as_integer()->get();
      if (x < lo || x > hi) p.fail(v, shown, fmt::format("must be in [{}, {}], got {}", lo, hi, x));
      return x;
    };
    if (key == "kind") {
      e.kind = text();
      if (e.kind != "local" && e.kind != "slurm")
        p.fail(v, shown, fmt::format("'{}' is not an executor (local or slurm)", e.kind));
    } else if (key == "partition" || key == "account" || key == "qos") {
      auto& field = key == "partition" ? e.partition : key == "account" ? e.account : e.qos;
      field = text();
      check_pattern(v, shown, field, "[A-Za-z0-9_.,-]+", "a Slurm name", p);
    } else if (key == "time") {
      e.time = text();
      check_pattern(v, shown, e.time, "([0-9]+-)?[0-9]+(:[0-9]{2}){0,2}",
                    "a Slurm time limit (MINUTES, HH:MM:SS or D-HH:MM:SS)", p);
    } else if (key == "mem") {
      e.mem = text();
      check_pattern(v, shown, e.mem, "[0-9]+[KMGT]?", "a Slurm memory size (e.g. 16G)", p);
    } else if (key == "gres") {
      e.gres = text();
      check_pattern(v, shown, e.gres,
                    "[A-Za-z0-9_]+(:[A-Za-z0-9_.-]+)?(:[0-9]+)?(,[A-Za-z0-9_]+(:[A-Za-z0-9_.-]+)?(:[0-9]+)?)*",
                    "a Slurm gres list (e.g. gpu:a100:1)", p);
    } else if (key == "cpus") {
      e.cpus = integer(1, 1024);
    } else if (key == "gpus") {
      e.gpus = integer(0, 64);
    } else if (key == "array_limit") {
      e.array_limit = integer(0, 1'000'000);
    } else if (key == "signal_before") {
      e.signal_before = integer(0, 65535);  // sbatch --signal's limit
    } else if (key == "extra") {
      if (!v.is_array()) p.fail(v, shown, "must be a list of sbatch arguments, e.g. [\"--constraint=a100\"]");
      for (const auto& a : *v.as_array()) {
        if (!a.is_string()) p.fail(a, shown, "must be a list of strings");
        const auto arg = a.as_string()->get();
        static const std::set<std::string> kOwned = {"--array",      "--job-name", "--comment", "--output",
                                                     "--error",      "--parsable", "--signal",  "--requeue",
                                                     "--no-requeue", "--wrap",     "--chdir"};
        if (arg.rfind("--", 0) != 0) p.fail(a, shown, fmt::format("'{}' is not an sbatch option (--name=value)", arg));
        if (kOwned.count(arg.substr(0, arg.find('='))))
          p.fail(a, shown, fmt::format("'{}' is set by fwlab itself (one array per wave, its logs, its signal)", arg));
        e.extra.push_back(arg);
      }
    } else {
      p.fail(v, shown, "unknown key" + did_you_mean(key, kKeys));
    }
  }
  return e;
}

}  // namespace

namespace {

// `seeds = N` (N > 1): the axis "seed" = [defaults.seed, ..., + N - 1], after the file's own axes.
void add_seed_axis(const toml::node* seeds, Experiment& ex, const Parser& p) {
  if (!seeds) return;
  const auto n = seeds->value<int64_t>();
  if (!seeds->is_integer() || *n < 1 || *n > 100)
    p.fail(*seeds, "experiment.seeds", "must be an integer from 1 to 100 (runs of each cell)");
  ex.seeds = *n;
  if (ex.seeds == 1) return;
  Axis a;
  a.name = a.key = "seed";
  a.pos = p.pos(*seeds);
  const auto base = ex.defaults.count("seed") && ex.defaults.at("seed").value.is_number_integer()
                        ? ex.defaults.at("seed").value.get<int64_t>()
                        : 0;
  for (int64_t i = 0; i < ex.seeds; ++i) a.values.push_back(base + i);
  // A grid axis "seed" beside it (`--set grid.seed=[2]`: one of the seeds again) may only pick among them.
  const auto own = std::find_if(ex.axes.begin(), ex.axes.end(), [](const Axis& x) { return x.name == "seed"; });
  if (own == ex.axes.end()) return ex.axes.push_back(std::move(a));
  for (const auto& v : own->values)
    if (std::find(a.values.begin(), a.values.end(), v) == a.values.end())
      throw ExperimentError(
          fmt::format("{}: grid.seed: {} is not one of the seeds experiment.seeds = {} runs ({} to {}): give the seeds "
                      "there, or in the grid, not both",
                      own->pos.str(), v.dump(), ex.seeds, base, base + ex.seeds - 1));
}

}  // namespace

namespace {

// The file as TOML: only a regular file (reading a FIFO or a device would hang or never end), of a sane size.
toml::table parse_file(const std::string& path) {
  std::error_code ec;
  const auto kind = std::filesystem::status(path, ec).type();
  if (kind == std::filesystem::file_type::not_found) throw ExperimentError(fmt::format("{}:1:1: no such file", path));
  if (ec || kind != std::filesystem::file_type::regular)
    throw ExperimentError(fmt::format("{}:1:1: not a regular file (an experiment file is a TOML text file)", path));
  if (std::filesystem::file_size(path, ec) > kMaxExperimentBytes)
    throw ExperimentError(
        fmt::format("{}:1:1: larger than {} MiB: not an experiment file", path, kMaxExperimentBytes >> 20));
  try {
    return toml::parse_file(std::string_view(path));
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw ExperimentError(fmt::format("{}:{}:{}: TOML syntax error: {}", path, b.line, b.column, e.description()));
  }
}

// TOML++ iterates a table in key order; the grid keeps the order the file wrote its axes in (a profile's
// replacement stays in its axis's place), so tables and job lists follow the file.
using WrittenOrder = std::vector<std::pair<SourcePos, std::string>>;
WrittenOrder grid_order(const toml::table& doc, const Parser& p) {
  WrittenOrder written;
  if (auto* g = doc["grid"].as_table())
    for (const auto& [k, v] : *g) written.emplace_back(p.pos(v), std::string(k.str()));
  std::sort(written.begin(), written.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first.line, a.first.column) < std::tie(b.first.line, b.first.column);
  });
  return written;
}

void check_sections(const toml::table& doc, const Parser& p, Experiment& ex) {
  for (const auto& [k, v] : doc) {
    const std::string key(k.str());
    if (!kTopSections.count(key))
      p.fail(v, key,
             "unknown section" + did_you_mean(key, std::vector<std::string>(kTopSections.begin(), kTopSections.end())));
  }
  if (auto* profiles = doc["profile"].as_table())
    for (const auto& [k, v] : *profiles) ex.profiles.emplace_back(k.str());
}

// [experiment]: name (a plain file name: it becomes a folder beside the results database), description, seeds.
const toml::table& read_meta(const toml::table& doc, const Parser& p, Experiment& ex, const std::string& path) {
  auto* meta = doc["experiment"].as_table();
  if (!meta) throw ExperimentError(fmt::format("{}:1:1: experiment: missing [experiment] section with a name", path));
  for (const auto& [k, v] : *meta) {
    const std::string key(k.str());
    if (key != "name" && key != "description" && key != "seeds")
      p.fail(v, "experiment." + key, "unknown key" + did_you_mean(key, {"name", "description", "seeds"}));
    if (key != "seeds" && !v.is_string()) p.fail(v, "experiment." + key, "must be a string");
  }
  ex.name = meta->get("name") ? *meta->get("name")->value<std::string>() : "";
  const bool plain = !ex.name.empty() && ex.name.size() <= 100 && ex.name[0] != '.' &&
                     std::all_of(ex.name.begin(), ex.name.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
                     });
  if (!plain)
    p.fail(meta->get("name") ? *meta->get("name") : static_cast<const toml::node&>(*meta), "experiment.name",
           "must be a plain name of letters, digits, '_', '-' and '.' (at most 100, not starting with '.')");
  if (auto d = meta->get("description")) ex.description = *d->value<std::string>();
  return *meta;
}

// [grid]: the axes, each a non-empty list of distinct values, in the order the file wrote them.
void read_grid(const toml::table& doc, const Parser& p, Experiment& ex, const WrittenOrder& written) {
  if (auto* g = doc["grid"].as_table()) {
    for (const auto& [k, v] : *g) {
      Axis a;
      a.name = std::string(k.str());
      a.pos = p.pos(v);
      const auto* arr = v.as_array();
      if (!arr || arr->empty()) p.fail(v, "grid." + a.name, "must be a non-empty list of values");
      for (const auto& e : *arr) a.values.push_back(p.to_json(e, "grid." + a.name));
      std::set<std::string> seen;
      for (const auto& val : a.values)
        if (!seen.insert(val.dump()).second)
          p.fail(v, "grid." + a.name, fmt::format("value {} appears twice", val.dump()));
      ex.axes.push_back(std::move(a));
    }
  } else if (doc.contains("grid")) {
    p.fail(*doc.get("grid"), "grid", "must be a table of axis = [values]");
  }
  const auto rank = [&](const Axis& a) {
    auto it = std::find_if(written.begin(), written.end(), [&](const auto& w) { return w.second == a.name; });
    return it - written.begin();  // axes only a profile adds come last
  };
  std::stable_sort(ex.axes.begin(), ex.axes.end(), [&](const Axis& a, const Axis& b) { return rank(a) < rank(b); });
}

std::vector<std::string> axis_names(const Experiment& ex) {
  std::vector<std::string> names;
  for (const auto& a : ex.axes) names.push_back(a.name);
  return names;
}

// [preset.AXIS.VALUE]: a bundle of settings one axis value selects.
void read_presets(const toml::table& doc, const Parser& p, Experiment& ex) {
  auto* pr = doc["preset"].as_table();
  if (!pr) return;
  for (const auto& [axis_key, by_value] : *pr) {
    const std::string axis(axis_key.str());
    const auto names = axis_names(ex);
    if (std::find(names.begin(), names.end(), axis) == names.end())
      p.fail(by_value, "preset." + axis, "is not an axis of the grid" + did_you_mean(axis, names));
    if (!by_value.is_table()) p.fail(by_value, "preset." + axis, "must hold one table per value");
    for (const auto& [value_key, settings] : *by_value.as_table()) {
      const std::string value(value_key.str());
      if (!settings.is_table())
        p.fail(settings, fmt::format("preset.{}.{}", axis, value), "must be a table of settings");
      p.flatten(*settings.as_table(), "", fmt::format("preset.{}.{}", axis, value), ex.presets[axis][value]);
    }
  }
}

// [axis.NAME] key = "...": the job key an axis with a name of its own sets (pairs -> data.mqar.pairs).
std::map<std::string, std::string> read_axis_keys(const toml::table& doc, const Parser& p, const Experiment& ex) {
  std::map<std::string, std::string> axis_keys;
  auto* ax = doc.get("axis");
  if (!ax) return axis_keys;
  if (!ax->is_table()) p.fail(*ax, "axis", "must be a table of [axis.NAME] sections");
  for (const auto& [k, v] : *ax->as_table()) {
    const std::string name(k.str()), where = "axis." + name;
    const auto names = axis_names(ex);
    if (std::find(names.begin(), names.end(), name) == names.end())
      p.fail(v, where, "is not an axis of the grid" + did_you_mean(name, names));
    if (!v.is_table()) p.fail(v, where, "must be a table with key = \"job key\"");
    for (const auto& [field, node] : *v.as_table()) {
      if (field.str() != "key")
        p.fail(node, where + "." + std::string(field.str()), "unknown key (axis sections hold only 'key')");
      if (!node.is_string()) p.fail(node, where + ".key", "must be a job key, e.g. \"data.mqar.pairs\"");
      std::string key = *node.value<std::string>();
      if (key_aliases().count(key)) key = key_aliases().at(key);
      const auto dot = key.find('.');
      if (!kJobScalars.count(key) && (dot == std::string::npos || !kJobSections.count(key.substr(0, dot))))
        p.fail(node, where + ".key", fmt::format("'{}' is not a job key (a short name or section.key)", key));
      axis_keys[name] = key;
    }
  }
  return axis_keys;
}

// The job key an axis's scalar values set: its [axis.NAME] key, a short name, or its own name when that is a job key.
void resolve_axis_key(Axis& a, const nlohmann::json& v, const Experiment& ex) {
  const auto presets = ex.presets.find(a.name);
  if (presets != ex.presets.end() && v.is_string()) {
    if (presets->second.count(v.get<std::string>())) return;
    std::vector<std::string> names;
    for (const auto& [n, s] : presets->second) names.push_back(n);
    throw ExperimentError(fmt::format("{}: grid.{}: preset '{}' does not exist{}", a.pos.str(), a.name,
                                      v.get<std::string>(), did_you_mean(v.get<std::string>(), names)));
  }
  if (!a.key.empty()) return;
  if (key_aliases().count(a.name))
    a.key = key_aliases().at(a.name);
  else if (kJobScalars.count(a.name))
    a.key = a.name;
  else if (auto dot = a.name.find('.'); dot != std::string::npos && kJobSections.count(a.name.substr(0, dot)))
    a.key = a.name;
  else {
    std::vector<std::string> known;
    for (const auto& [al, t] : key_aliases()) known.push_back(al);
    throw ExperimentError(
        fmt::format("{}: grid.{}: axis '{}' sets no job key and has no [preset.{}.*] tables{}{}", a.pos.str(), a.name,
                    a.name, a.name, did_you_mean(a.name, known),
                    ex.derive.empty() ? "" : ", and no [derive.NAME] section names it as its selector or count"));
  }
}

// The axes a [derive.NAME] section reads (its selector and count): their values choose a derived setting (derive.h)
// instead of setting a job key of their own.
std::set<std::string> derived_axes(const toml::table& doc) {
  std::set<std::string> out;
  if (auto* derive = doc["derive"].as_table())
    for (const auto& [name, section] : *derive)
      if (auto* t = section.as_table())
        for (const char* key : {"selector", "count"})
          if (auto v = t->get(key) ? t->get(key)->value<std::string>() : std::nullopt) out.insert(*v);
  return out;
}

void resolve_axis_keys(Experiment& ex, const std::map<std::string, std::string>& axis_keys,
                       const std::set<std::string>& derived) {
  for (auto& a : ex.axes) {
    if (axis_keys.count(a.name)) a.key = axis_keys.at(a.name);
    a.derived = derived.count(a.name) && a.key.empty() && !ex.presets.count(a.name);
    if (a.derived) continue;
    for (const auto& v : a.values) resolve_axis_key(a, v, ex);
  }
}

// One [stage.NAME]: from, axes, timeout and its settings.
Stage read_stage(const std::string& name, const toml::node& v, const toml::table& stages, const Parser& p,
                 const Experiment& ex) {
  Stage s;
  s.name = name;
  s.pos = p.pos(v);
  const std::string where = "stage." + s.name;
  if (!v.is_table()) p.fail(v, where, "must be a table");
  const auto& t = *v.as_table();
  if (auto f = t.get("from")) {
    s.from_pos = p.pos(*f);
    if (!f->is_string()) p.fail(*f, where + ".from", "must be the name of another stage");
    s.from = *f->value<std::string>();
    if (!stages.contains(s.from)) {
      std::vector<std::string> names;
      for (const auto& [n, x] : stages) names.emplace_back(n.str());
      p.fail(*f, where + ".from", fmt::format("stage '{}' does not exist{}", s.from, did_you_mean(s.from, names)));
    }
  }
  if (auto a = t.get("axes")) {
    s.axes = string_list(*a, where + ".axes", p);
    s.axes_given = true;
    for (const auto& axis : s.axes)
      if (std::none_of(ex.axes.begin(), ex.axes.end(), [&](const Axis& x) { return x.name == axis; }))
        p.fail(*a, where + ".axes", fmt::format("'{}' is not an axis of the grid", axis));
    if (ex.seeds > 1 && !s.axes.empty() && std::count(s.axes.begin(), s.axes.end(), "seed") == 0)
      s.axes.push_back("seed");
  } else {
    for (const auto& x : ex.axes) s.axes.push_back(x.name);
  }
  if (auto to = t.get("timeout")) {
    if (!to->is_number() || to->value<double>().value_or(-1) <= 0)
      p.fail(*to, where + ".timeout", "must be a positive number of seconds");
    s.timeout_s = *to->value<double>();
  }
  p.flatten(t, "", where, s.settings, {"from", "axes", "timeout"});
  if (ex.seeds > 1 && s.settings.count("seed") && std::count(s.axes.begin(), s.axes.end(), "seed"))
    throw ExperimentError(
        fmt::format("{}: {}.seed: experiment.seeds = {} varies the seed of this stage; its own seed would "
                    "override every one of them",
                    s.settings.at("seed").pos.str(), where, ex.seeds));
  return s;
}

// The error for stages that never become placeable: the cycle through the first of them.
[[noreturn]] void fail_cycle(const std::vector<Stage>& unordered, const std::set<std::string>& placed) {
  for (const auto& s : unordered) {
    if (placed.count(s.name)) continue;
    std::string chain = s.name, at = s.from;
    std::set<std::string> seen{s.name};
    while (!at.empty() && !seen.count(at)) {
      chain += " -> " + at;
      seen.insert(at);
      at = std::find_if(unordered.begin(), unordered.end(), [&](const Stage& x) { return x.name == at; })->from;
    }
    chain += " -> " + at;
    throw ExperimentError(fmt::format("{}: stage.{}.from: dependency cycle {}", s.from_pos.str(), s.name, chain));
  }
  throw std::logic_error("fail_cycle: every stage was placed");
}

// The stages in dependency order (a cycle is an error naming one of its stages); a stage varies at least the axes
// of the stage it starts from.
void order_stages(const std::vector<Stage>& unordered, Experiment& ex) {
  std::set<std::string> placed;
  while (ex.stages.size() < unordered.size()) {
    bool progress = false;
    for (const auto& s : unordered) {
      if (placed.count(s.name) || (!s.from.empty() && !placed.count(s.from))) continue;
      if (std::any_of(s.after.begin(), s.after.end(), [&](const std::string& a) {
            return !placed.count(a) &&
                   std::any_of(unordered.begin(), unordered.end(), [&](const Stage& x) { return x.name == a; });
          }))
        continue;  // a stage whose results a derived setting reads comes first
      ex.stages.push_back(s);
      placed.insert(s.name);
      progress = true;
    }
    if (!progress) fail_cycle(unordered, placed);
  }
  for (const auto& s : ex.stages) {
    if (s.from.empty()) continue;
    const auto& parent =
        *std::find_if(ex.stages.begin(), ex.stages.end(), [&](const Stage& x) { return x.name == s.from; });
    for (const auto& a : parent.axes)
      if (std::find(s.axes.begin(), s.axes.end(), a) == s.axes.end())
        throw ExperimentError(
            fmt::format("{}: stage.{}.axes: stage '{}' it starts from varies '{}', so this stage must too", s.pos.str(),
                        s.name, parent.name, a));
  }
}

// [derive.NAME] stage / probes / transfer: a derived stage is planned after the stages whose results it reads
// (harness/derive.cpp checks the rest of the section).
void add_derived_inputs(const toml::table& doc, std::vector<Stage>& stages) {
  auto* derive = doc["derive"].as_table();
  if (!derive) return;
  for (const auto& [name, section] : *derive) {
    const auto* t = section.as_table();
    const auto target = t && t->get("stage") ? t->get("stage")->value<std::string>() : std::nullopt;
    if (!target) continue;
    for (auto& s : stages)
      if (s.name == *target)
        for (const char* input : {"probes", "transfer"})
          if (const auto v = t->get(input) ? t->get(input)->value<std::string>() : std::nullopt) s.after.push_back(*v);
  }
}

const toml::table& read_stages(const toml::table& doc, const Parser& p, Experiment& ex, const std::string& path) {
  auto* stages = doc["stage"].as_table();
  if (!stages || stages->empty())
    throw ExperimentError(fmt::format("{}:1:1: stage: at least one [stage.NAME] is required", path));
  std::vector<Stage> unordered;
  for (const auto& [k, v] : *stages) unordered.push_back(read_stage(std::string(k.str()), v, *stages, p, ex));
  add_derived_inputs(doc, unordered);
  order_stages(unordered, ex);
  return *stages;
}

// [[not_applicable]], [[exclude]] or [[cell]] (`extra`): rules matching cells by axis values.
void read_rules(const toml::table& doc, const char* section, const toml::table& stages, const Parser& p, Experiment& ex,
                std::vector<CellRule>& out, bool extra) {
  if (!doc.contains(section)) return;
  auto* arr = doc[section].as_array();
  if (!arr) p.fail(*doc.get(section), section, fmt::format("must be written [[{}]]", section));
  for (size_t i = 0; i < arr->size(); ++i) {
    auto* t = arr->get(i)->as_table();
    if (!t) p.fail(*arr->get(i), section, fmt::format("must be written [[{}]]", section));
    auto r = read_rule(*t, fmt::format("{}[{}]", section, i), ex, p, extra);
    if (!extra && about_left_out_value(r, ex)) continue;  // it matches no cell of the subset
    if (!r.stage.empty() && !stages.contains(r.stage))
      p.fail(*t, fmt::format("{}[{}].stage", section, i), fmt::format("stage '{}' does not exist", r.stage));
    for (const auto& [axis, value] : r.match) {
      const std::string& name = axis;  // a lambda cannot capture a structured binding before C++20 in clang 14
      const auto& a = *std::find_if(ex.axes.begin(), ex.axes.end(), [&](const Axis& x) { return x.name == name; });
      if (!extra && std::find(a.values.begin(), a.values.end(), value) == a.values.end())
        p.fail(*t, fmt::format("{}[{}].{}", section, i, axis),
               fmt::format("{} is not a value of axis '{}'", value.dump(), axis));
    }
    out.push_back(std::move(r));
  }
}

void read_cell_rules(const toml::table& doc, const toml::table& stages, const Parser& p, Experiment& ex) {
  read_rules(doc, "not_applicable", stages, p, ex, ex.not_applicable, false);
  read_rules(doc, "exclude", stages, p, ex, ex.exclude, false);
  read_rules(doc, "cell", stages, p, ex, ex.extra_cells, true);
  for (size_t i = 0; i < ex.extra_cells.size(); ++i)
    if (ex.extra_cells[i].stage.empty())
      throw ExperimentError(
          fmt::format("{}: cell[{}].stage: an extra cell must name its stage", ex.extra_cells[i].pos.str(), i));
}

// [table], [[plot]] and [published] belong to the analysis commands, which check them; keep where each key was
// written.
void read_analysis_sections(const toml::table& doc, const Parser& p, Experiment& ex) {
  std::function<void(const toml::node&, const std::string&)> remember = [&](const toml::node& n,
                                                                            const std::string& key) {
    ex.analysis_pos[key] = p.pos(n);
    if (auto* t = n.as_table())
      for (const auto& [k, v] : *t) remember(v, key + "." + std::string(k.str()));
    if (auto* a = n.as_array())
      for (size_t i = 0; i < a->size(); ++i) remember(*a->get(i), fmt::format("{}[{}]", key, i));
  };
  if (auto* t = doc.get("table")) {
    if (!t->is_table()) p.fail(*t, "table", "must be a table ([table])");
    ex.table = p.to_json(*t, "table");
    remember(*t, "table");
  }
  if (auto* pl = doc.get("plot")) {
    if (!pl->is_array_of_tables()) p.fail(*pl, "plot", "must be an array of tables ([[plot]])");
    ex.plots = p.to_json(*pl, "plot");
    remember(*pl, "plot");
  }
  if (auto* t = doc.get("tables")) {
    if (!t->is_table()) p.fail(*t, "tables", "must be a table of [tables.NAME] sections");
    ex.tables = p.to_json(*t, "tables");
    remember(*t, "tables");
  }
  if (auto* d = doc.get("derive")) {
    if (!d->is_table()) p.fail(*d, "derive", "must be a table of [derive.NAME] sections");
    ex.derive = p.to_json(*d, "derive");
    remember(*d, "derive");
  }
  if (auto* pub = doc.get("published")) {
    if (!pub->is_table()) p.fail(*pub, "published", "must be a table ([published])");
    ex.published = p.to_json(*pub, "published");
    remember(*pub, "published");
  }
}

}  // namespace

Experiment load_experiment(const std::string& path, const std::string& profile, const std::vector<std::string>& sets) {
  Parser p(path);
  auto doc = parse_file(path);
  const auto written = grid_order(doc, p);
  Experiment ex;
  ex.written_axes = written_axis_values(doc, p);
  apply_profile(doc, profile, p);
  apply_sets(doc, sets, p, ex);
  ex.file = path;
  ex.sets = sets;
  check_sections(doc, p, ex);
  const auto& meta = read_meta(doc, p, ex, path);
  if (auto* d = doc["defaults"].as_table()) p.flatten(*d, "", "defaults", ex.defaults);
  // Grid axes, then presets, so that stages and rules can be checked against them.
  read_grid(doc, p, ex, written);
  read_presets(doc, p, ex);
  if (doc.get("derive")) ex.derive = p.to_json(*doc.get("derive"), "derive");  // the axes' check mentions it
  resolve_axis_keys(ex, read_axis_keys(doc, p, ex), derived_axes(doc));
  add_seed_axis(meta.get("seeds"), ex, p);
  check_job_sets_against_grid(ex);
  const auto& stages = read_stages(doc, p, ex, path);
  read_cell_rules(doc, stages, p, ex);
  if (auto* e = doc.get("executor")) ex.executor = parse_executor(*e, p);
  read_analysis_sections(doc, p, ex);
  return ex;
}

}  // namespace fwlab
