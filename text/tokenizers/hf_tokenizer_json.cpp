#include "text/tokenizers/hf_tokenizer_json.h"

#include <fmt/format.h>

#include <cstdint>
#include <utility>

namespace fwlab {

namespace {

// One "single" template: [SpecialToken ...] {Sequence A} [SpecialToken ...], ids from "special_tokens".
HfJsonTokenizer::Template read_template(const nlohmann::json& spec, const JsonPlace& at) {
  const auto* single = json_member(spec, "single");
  if (!single || !single->is_array()) (at / "single").fail("expected a list of template pieces");
  const auto* specials = json_member(spec, "special_tokens");
  HfJsonTokenizer::Template t;
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const auto& piece = (*single)[i];
    const auto where = (at / "single")[i];
    if (const auto* seq = json_member(piece, "Sequence")) {
      if (seen_sequence || json_string(*seq, "id", "A", where / "Sequence") != "A")
        where.fail("a single-sequence template holds $A once");
      seen_sequence = true;
      continue;
    }
    const auto* special = json_member(piece, "SpecialToken");
    if (!special)
      where.fail(
          fmt::format("expected {{\"SpecialToken\": ...}} or {{\"Sequence\": ...}}, got {}", json_excerpt(piece)));
    const auto name = json_string(*special, "id", "", where / "SpecialToken");
    const auto* entry = specials ? json_member(*specials, name.c_str()) : nullptr;
    const auto* ids = entry ? json_member(*entry, "ids") : nullptr;
    if (!ids || !ids->is_array())
      (at / "special_tokens").fail(fmt::format("no \"ids\" for the template's token {}", nlohmann::json(name).dump()));
    for (const auto& id : *ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        (at / "special_tokens" / name / "ids").fail(fmt::format("{} is not a token id", json_excerpt(id)));
      (seen_sequence ? t.after : t.before).push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  if (!seen_sequence) (at / "single").fail("the template has no $A (the text would be dropped)");
  return t;
}

}  // namespace

HfJsonTokenizer::HfJsonTokenizer(const std::string& tokenizer_json, const std::string& config_json, std::string name)
    : name_(std::move(name)) {
  const auto j = read_json_file(tokenizer_json);
  const JsonPlace at{tokenizer_json, ""};
  if (!j.is_object()) at.fail("expected a JSON object (Hugging Face's tokenizer.json)");
  if (const auto version = json_string(j, "version", "1.0", at); version != "1.0")
    (at / "version").fail(fmt::format("'{}' is not a tokenizer.json version fwlab knows (1.0)", version));
  normalizer_ = Normalizer::from_json(json_member(j, "normalizer"), at / "normalizer");
  pre_tokenizer_ = PreTokenizer::from_json(json_member(j, "pre_tokenizer"), at / "pre_tokenizer");
  const auto* model = json_member(j, "model");
  if (!model) (at / "model").fail("missing (the BPE model)");
  model_ = std::make_unique<BpeModel>(*model, at / "model");
  added_ = std::make_unique<AddedVocabulary>(json_member(j, "added_tokens"), *model_, normalizer_, at / "added_tokens");
  vocab_size_ = std::max(model_->max_id(), added_->max_id()) + 1;
  read_post_processor(json_member(j, "post_processor"), at / "post_processor");
  decoder_ = Decoder::from_json(json_member(j, "decoder"), at / "decoder");
  check_special_ids(tokenizer_json);
  apply_config(read_tokenizer_config(config_json), config_json);
}

// ByteLevel only trims offsets (ids unchanged); TemplateProcessing adds its special tokens; Sequence chains them.
void HfJsonTokenizer::read_post_processor(const nlohmann::json* spec, const JsonPlace& at) {
  if (!spec) return;
  const auto type = json_type(*spec, at);
  if (type == "ByteLevel") return;
  if (type == "TemplateProcessing") {
    post_.push_back(read_template(*spec, at));
  } else if (type == "Sequence") {
    const auto* parts = json_member(*spec, "processors");
    if (!parts || !parts->is_array()) (at / "processors").fail("expected a list of post-processors");
    for (size_t i = 0; i < parts->size(); ++i) read_post_processor(&(*parts)[i], (at / "processors")[i]);
  } else {
    (at / "type")
        .fail(fmt::format(
            "post_processor '{}' is not supported (supported: none, ByteLevel, TemplateProcessing, Sequence)", type));
  }
}

// Either key present replaces the post-processor by [bos] $A [eos], each end as its key says (an absent key
// counts as false, a null token drops its end), as tests/python/hf_tokenizer.py documents.
void HfJsonTokenizer::apply_config(const TokenizerConfig& config, const std::string& config_json) {
  if (!config.sets_special) return;
  auto id_of = [&](const std::optional<std::string>& token, const char* key) {
    const auto id = token_to_id(*token);
    if (!id)
      throw DataError(
          fmt::format("{}: {}: {} is not in the vocabulary", config_json, key, nlohmann::json(*token).dump()));
    return *id;
  };
  Template t;
  if (config.add_bos && config.bos_token) t.before.push_back(id_of(config.bos_token, "bos_token"));
  if (config.add_eos && config.eos_token) t.after.push_back(id_of(config.eos_token, "eos_token"));
  post_ = {t};
}

// Special tokens of the templates must be tokens of the vocabulary: an id past it would reach the model.
void HfJsonTokenizer::check_special_ids(const std::string& file) const {
  for (const auto& t : post_)
    for (const auto* ids : {&t.before, &t.after})
      for (const auto id : *ids)
        if (id >= vocab_size_)
          throw DataError(fmt::format("{}: post_processor: special token id {} is outside the vocabulary of {}", file,
                                      id, vocab_size_));
}

std::optional<int32_t> HfJsonTokenizer::token_to_id(const std::string& token) const {
  if (const auto id = added_->id_of(token)) return id;
  return model_->token_to_id(token);
}

std::vector<int32_t> HfJsonTokenizer::encode(std::string_view input, bool add_special_tokens) const {
  const auto repaired = repair_utf8(input);
  const std::string_view text = repaired ? std::string_view(*repaired) : input;
  std::vector<int32_t> ids;
  // Whether the next piece begins at offset 0 of the input: Metaspace's prepend_scheme "first" prefixes that one
  // only (metaspace.rs reads normalized.offsets_original().0 == 0), not the text after a special token.
  bool at_start = true;
  auto model_pieces = [&](std::string_view piece, int32_t id) {
    const bool first = std::exchange(at_start, false);
    if (id >= 0) return ids.push_back(id);
    pre_tokenizer_.run(piece, first, [&](std::string_view part) { model_->tokenize(part, ids); });
  };
  added_->split(text, false, [&](std::string_view piece, int32_t id) {
    if (id >= 0) {
      at_start = false;
      ids.push_back(id);
      return;
    }
    if (normalizer_.identity()) return added_->split(piece, true, model_pieces);
    added_->split(normalizer_.apply(piece), true, model_pieces);
  });
  for (const auto& t : post_) {
    if (!add_special_tokens || (t.before.empty() && t.after.empty())) continue;
    std::vector<int32_t> out(t.before);
    out.insert(out.end(), ids.begin(), ids.end());
    out.insert(out.end(), t.after.begin(), t.after.end());
    ids = std::move(out);
  }
  return ids;
}

std::string HfJsonTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::vector<std::string> tokens;
  for (const auto id : ids) {
    if (const auto* added = added_->token(id))
      tokens.push_back(added->pattern);
    else if (const auto* token = model_->id_to_token(id))
      tokens.push_back(*token);
  }
  return decoder_.decode(std::move(tokens));
}

}  // namespace fwlab
