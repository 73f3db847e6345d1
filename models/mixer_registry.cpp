// The token mixers fwlab builds, by kind: a new mixer is its files and one line here (and its row in
// contract/model/mixer_table.cpp, which a test binds to this list).
#include <fmt/format.h>

#include "contract/model/named_rows.h"
#include "models/base_conv.h"
#include "models/mixers.h"

namespace fwlab {

namespace {

using MixerFactory = std::shared_ptr<Mixer> (*)(const MixerSpec& spec, const ModelConfig& cfg);

struct Entry {
  std::string name;
  MixerFactory make;
};

std::shared_ptr<Mixer> softmax(const MixerSpec&, const ModelConfig& cfg) {
  return std::make_shared<SoftmaxAttention>(cfg, 0);
}
std::shared_ptr<Mixer> local(const MixerSpec& s, const ModelConfig& cfg) {
  return std::make_shared<SoftmaxAttention>(cfg, s.window);
}
std::shared_ptr<Mixer> fast_weight(const MixerSpec& s, const ModelConfig& cfg) {
  return std::make_shared<FastWeight>(s, cfg);
}
std::shared_ptr<Mixer> sru(const MixerSpec& s, const ModelConfig& cfg) { return std::make_shared<Sru>(s, cfg); }
std::shared_ptr<Mixer> base_conv(const MixerSpec& s, const ModelConfig& cfg) {
  return std::make_shared<BaseConv>(s, cfg);
}

const std::vector<Entry>& registry() {
  static const std::vector<Entry> mixers = {
      {"softmax", softmax}, {"local", local}, {"fast_weight", fast_weight},
      {"sru", sru},         {"srupp", sru},   {"base_conv", base_conv},
  };
  return mixers;
}

}  // namespace

std::shared_ptr<Mixer> make_mixer(const MixerSpec& spec, const ModelConfig& cfg) {
  if (const auto* entry = find_named_row(registry(), spec.kind)) return entry->make(spec, cfg);
  throw ConfigError("kind", fmt::format("unknown mixer kind '{}'", spec.kind));
}

std::vector<std::string> registered_mixers() { return row_names(registry()); }

}  // namespace fwlab
