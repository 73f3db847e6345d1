// The experiment catalog (experiments/*.toml) at its smoke profile, end to end with the real worker: sweep,
// then table, report and plots from the database the sweep filled.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>

#include "harness/db.h"
#include "harness/experiment.h"
#include "tests/test_support.h"

using namespace fwlab;
using fwlab::test::fwlab_cmd;
namespace fs = std::filesystem;

namespace {

int64_t count(Db& db, const std::string& sql) {
  auto q = db.prepare(sql);
  REQUIRE(q.step());
  return q.integer(0);
}

struct Expected {
  std::string name;
  std::vector<std::string> table_lines;  // lines the Markdown table must contain
  std::vector<std::string> figures;      // file stems in plots/
};

// Sweeps `e.name` at the smoke profile into `dir`, then checks the analysis outputs; returns the Markdown table.
std::string run_smoke(const test::TempDir& dir, const Expected& e) {
  const auto file = fmt::format("{}/experiments/{}.toml", FWLAB_SOURCE_DIR, e.name);
  const auto db = dir.file("fwlab.db");
  const auto sweep = test::run_command(fwlab_cmd(fmt::format("sweep {} --profile smoke --db {}", file, db)));
  INFO(sweep.output);
  REQUIRE(sweep.exit_code == 0);
  const auto table = test::run_command(fwlab_cmd(fmt::format("table {} --profile smoke --db {}", file, db)));
  INFO(table.output);
  REQUIRE(table.exit_code == 0);
  for (const auto& line : e.table_lines) CHECK_THAT(table.output, Catch::Contains(line));
  // Every cell holds a result: no "not run", "running" or "failed" marker.
  for (const std::string marker : {"| – |", "| … |", "| ! |", " … |", " ! |"})
    CHECK_THAT(table.output, !Catch::Contains(marker));
  const auto report = test::run_command(
      fwlab_cmd(fmt::format("report {} --profile smoke --db {} --out {}", file, db, dir.file("report.md"))));
  CHECK(report.exit_code == 0);
  CHECK_THAT(test::slurp(dir.file("report.md")),
             Catch::StartsWith(fmt::format("# Divergence report: {} (smoke profile)", e.name)));
  const auto plots = test::run_command(
      fwlab_cmd(fmt::format("plot {} --profile smoke --db {} --out {}", file, db, dir.file("plots"))));
  INFO(plots.output);
  CHECK(plots.exit_code == 0);
  size_t listed = 0;
  for (size_t at = plots.output.find(".png (.svg, .gp)"); at != std::string::npos;
       at = plots.output.find(".png (.svg, .gp)", at + 1))
    ++listed;
  CHECK(listed == e.figures.size());
  for (const auto& stem : e.figures)
    for (const std::string ext : {".png", ".svg", ".gp"}) {
      INFO(stem + ext);
      const auto path = fs::path(dir.file("plots")) / (stem + ext);
      CHECK((fs::exists(path) && fs::file_size(path) > 500));
    }
  return table.output;
}

}  // namespace

TEST_CASE("catalog: table1 at the smoke profile end to end and a re-run does nothing", "[catalog]") {
  test::TempDir dir("table1");
  const auto md =
      run_smoke(dir, {"table1",
                      {"| rule | Baseline | Norm ✗ | φ ✗ |", "| decay | N/A |",
                       "| gated_delta (not in the paper) | N/A |", "Reference: softmax teacher (before fine-tuning): ",
                       "Reference: softmax teacher fine-tuned the same steps (control): "},
                      {"curves_add", "curves_delta", "curves_gated", "curves_decay", "curves_gated_delta",
                       "curves_column_baseline", "curves_column_norm_off", "curves_column_phi_off"}});
  CHECK(std::count(md.begin(), md.end(), '\n') >= 10);
  Db db(dir.file("fwlab.db"), true);
  CHECK(count(db, "SELECT COUNT(*) FROM cells WHERE experiment = 'table1' AND profile = 'smoke'") ==
        17);  // 5 rules x 3 variants, the teacher, the control
  CHECK(count(db,
              "SELECT COUNT(*) FROM cells WHERE applicable = 0 AND coords = "
              "'{\"rule\":\"decay\",\"variant\":\"baseline\"}'") == 1);
  CHECK(count(db,
              "SELECT COUNT(*) FROM cells WHERE applicable = 0 AND coords = "
              "'{\"rule\":\"gated_delta\",\"variant\":\"baseline\"}'") == 1);
  CHECK(count(db, "SELECT COUNT(*) FROM jobs WHERE status IN ('finished', 'diverged')") == 15);
  CHECK(count(db,
              "SELECT COUNT(*) FROM jobs WHERE stage = 'finetune' AND depends_on = (SELECT id FROM jobs WHERE stage = "
              "'pretrain')") == 13);
  CHECK(count(db,
              "SELECT COUNT(*) FROM evals e JOIN jobs j ON j.id = e.job_id WHERE e.split = 'test' AND j.status = "
              "'finished'") == count(db, "SELECT COUNT(*) FROM jobs WHERE status = 'finished'"));
  CHECK(count(db, "SELECT COUNT(*) FROM events WHERE type = 'conversion'") ==
        14);  // the control converts softmax to itself
  const auto again = test::run_command(fwlab_cmd(
      fmt::format("sweep {}/experiments/table1.toml --profile smoke --db {}", FWLAB_SOURCE_DIR, dir.file("fwlab.db"))));
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.output, Catch::Contains("0 finished, 0 diverged") && Catch::Contains("15 already done, 2 n/a"));
  CHECK(count(db, "SELECT SUM(attempts) FROM jobs") == 15);
}

TEST_CASE("catalog: table2 at the smoke profile", "[catalog]") {
  test::TempDir dir("table2");
  run_smoke(dir,
            {"table2",
             {"| model | m | state / sequence | test ppl |", "| Softmax, fine-tuned the same steps (control) | none |",
              "| Gated | 16 |", "| Decay | 32 |", "| Gated delta (not in the paper) | 32 |"},
             {"curves", "vs_m"}});
}

TEST_CASE("catalog: fig1_generation at the smoke profile: softmax state grows with the length and decay's does not",
          "[catalog]") {
  test::TempDir dir("fig1");
  run_smoke(dir, {"fig1_generation",
                  {"| Softmax (KV cache) |", "| Delta, m = 32 |", "| Decay, m = 32 |",
                   "| Gated delta, m = 32 (not in the paper) |"},
                  {"generation"}});
  Db db(dir.file("fwlab.db"), true);
  const auto bytes = [&](const std::string& model, int64_t len) {
    return count(
        db,
        fmt::format(
            "SELECT CAST(m.value AS INTEGER) FROM metrics m JOIN cells c ON c.job_id = m.job_id WHERE c.experiment = "
            "'fig1_generation' AND json_extract(c.coords, '$.model') = '{}' AND m.key = 'gen_state_bytes' AND m.step = "
            "{}",
            model, len));
  };
  CHECK(bytes("softmax", 256) > 10 * bytes("softmax", 16));
  CHECK(bytes("decay", 256) == bytes("decay", 16));
  CHECK(bytes("delta", 256) == bytes("delta", 16));
  CHECK(bytes("gated_delta", 256) == bytes("delta", 256));  // the same state: S of head_dim x m per head
}

TEST_CASE(
    "catalog: t2r_table2 at the smoke profile (translation: BLEU of every decoder with the teacher as the reference)",
    "[catalog]") {
  test::TempDir dir("t2r_mt");
  run_smoke(dir,
            {"t2r_table2",
             {"| model | Random init | Pretrain |", "| T2R (32 / 4) |", "Reference: softmax transformer (teacher): "},
             {}});
  Db db(dir.file("fwlab.db"), true);
  // Every job decoded the 20 test sentences and recorded both BLEU scores.
  CHECK(count(db, "SELECT COUNT(*) FROM metrics WHERE key = 'bleu'") == 7);
  CHECK(count(db, "SELECT COUNT(*) FROM metrics WHERE key = 'sacrebleu'") == 7);
  const auto compare =
      test::run_command(fwlab_cmd(fmt::format("table {}/experiments/t2r_table2.toml --profile smoke --db {} --compare",
                                              FWLAB_SOURCE_DIR, dir.file("fwlab.db"))));
  CHECK(compare.exit_code == 0);
  CHECK_THAT(compare.output, Catch::Contains("/ 28.7 |"));  // T2R, pretrain: the paper's number beside fwlab's
}

TEST_CASE("catalog: sru_iwslt at the smoke profile (an SRU++ encoder-decoder against a Transformer of matched size)",
          "[catalog]") {
  test::TempDir dir("sru_iwslt");
  run_smoke(dir, {"sru_iwslt", {"| model | BLEU (sacreBLEU) | parameters |", "| Transformer |", "| SRU++ |"}, {}});
  Db db(dir.file("fwlab.db"), true);
  CHECK(count(db, "SELECT COUNT(*) FROM metrics WHERE key = 'sacrebleu'") == 2);
  // The SRU++ model's parameters are within 10% of the Transformer's (its MLP is widened to match).
  const auto params = [&](const std::string& model) {
    return count(
        db,
        fmt::format(
            "SELECT r.n_params FROM runs r JOIN cells c ON c.job_id = r.job_id WHERE c.experiment = 'sru_iwslt' AND "
            "json_extract(c.coords, '$.model') = '{}'",
            model));
  };
  CHECK(std::abs(params("srupp") - params("transformer")) * 10 < params("transformer"));
}

TEST_CASE(
    "catalog: t2r_mt_speed at the smoke profile: the softmax decoder's memory grows with the length and T2R's does not",
    "[catalog]") {
  test::TempDir dir("t2r_speed");
  run_smoke(dir,
            {"t2r_mt_speed", {"| Softmax (KV cache) |", "| T2R (32 / 4) |", "| ELU + 1 (64 / 64) |"}, {"generation"}});
  Db db(dir.file("fwlab.db"), true);
  const auto bytes = [&](const std::string& model, int64_t len) {
    return count(
        db,
        fmt::format(
            "SELECT CAST(m.value AS INTEGER) FROM metrics m JOIN cells c ON c.job_id = m.job_id WHERE c.experiment = "
            "'t2r_mt_speed' AND json_extract(c.coords, '$.model') = '{}' AND m.key = 'gen_state_bytes' AND m.step = {}",
            model, len));
  };
  CHECK(bytes("softmax", 32) > bytes("softmax", 8));
  CHECK(bytes("t2r", 32) == bytes("t2r", 8));
  CHECK(bytes("rfa", 32) == bytes("t2r", 32));  // the same feature sizes: 32 cross, 4 causal
  CHECK(bytes("t2r", 32) < bytes("softmax", 32));
}

TEST_CASE("catalog: t2r_table1 at the smoke profile", "[catalog]") {
  test::TempDir dir("t2r");
  run_smoke(
      dir,
      {"t2r_table1",
       {"| model | Random init | Pretrain |", "| T2R 75% | N/A |", "Reference: pretrained softmax transformer: "},
       {"curves_elu", "curves_rfa", "curves_t2r", "curves_t2r_75", "curves_column_scratch", "curves_column_finetune"}});
}

TEST_CASE("catalog: t2r_feature_size at the smoke profile", "[catalog]") {
  test::TempDir dir("t2r_fs");
  run_smoke(dir, {"t2r_feature_size",
                  {"| stage | m=4 | m=16 |", "| T2R, random init |", "| T2R, pretrain |"},
                  {"curves_scratch", "curves_finetune", "curves_column_4", "curves_column_16", "vs_m"}});
}

TEST_CASE("catalog: transfer at the smoke profile (conversions as columns and the window hybrid for decay only)",
          "[catalog]") {
  test::TempDir dir("transfer");
  const auto md =
      run_smoke(dir, {"transfer",
                      {"| rule | attention | m | swap → finetune | transfer → finetune | transfer → LoRA |",
                       "| decay | + sliding window | 4 |", "Reference: softmax teacher (before conversion): "},
                      {"curves_add_linear_4", "curves_gated_linear_4", "curves_decay_linear_4", "curves_decay_window_4",
                       "curves_column_swap", "curves_column_transfer_ft", "curves_column_transfer_lora", "vs_tokens"}});
  CHECK_THAT(md, !Catch::Contains("| add | + sliding window"));
  Db db(dir.file("fwlab.db"));
  // The log schedule: a 10-step stage evaluates after steps 1, 2, 3, 4, 5, 7 and 10 (10^(i / 7) rounded).
  CHECK(count(db,
              "SELECT COUNT(*) FROM evals e JOIN jobs j ON j.id = e.job_id WHERE j.stage = 'swap' AND "
              "e.split = 'valid' AND e.step IN (1, 2, 3, 4, 5, 7, 10)") == 4 * 7);
  // Transfer trained the new mixers only; its LoRA follow-up only the adapters.
  CHECK(count(db, "SELECT COUNT(*) FROM metrics WHERE key LIKE 'transfer_mse.%'") > 0);
  CHECK(count(db,
              "SELECT COUNT(*) FROM jobs WHERE stage = 'transfer_lora' AND json_extract(config, '$.train.trainable') = "
              "'lora' "
              "AND json_extract(config, '$.model.lora_rank') = 8") == 4);
}

TEST_CASE(
    "catalog: conversion_eval at the smoke profile (eval stages: tasks as columns with their average and % of the "
    "teacher row)",
    "[catalog]") {
  test::TempDir dir("conversion_eval");
  const auto md = run_smoke(
      dir, {"conversion_eval",
            {"| stage | rule | LAMBADA-Brown acc | cloze acc_norm | passkey acc | average | % of softmax teacher |",
             "| transfer → LoRA + KL | gated_delta |", "| softmax teacher |  |"},
            {"passkey_eval_swap_add", "passkey_eval_swap_gated_delta", "passkey_eval_lora_add",
             "passkey_eval_lora_gated_delta", "passkey_eval_lora_kl_add", "passkey_eval_lora_kl_gated_delta",
             "passkey_eval_teacher"}});
  const auto teacher = md.substr(md.find("| softmax teacher |"));
  CHECK_THAT(teacher.substr(0, teacher.find('\n')), Catch::EndsWith("| 100.0 |"));
  Db db(dir.file("fwlab.db"));
  // Every eval job scored every document of its tasks, and the KL stage trained with the teacher's distribution.
  CHECK(count(db, "SELECT COUNT(*) FROM metrics WHERE key = 'lambada.acc'") == 7);
  CHECK(count(db,
              "SELECT COUNT(*) FROM events WHERE type = 'task' AND json_extract(body, '$.name') = 'cloze' "
              "AND json_extract(body, '$.documents') = 8") == 7);
  CHECK(
      count(
          db,
          "SELECT COUNT(*) FROM jobs WHERE stage = 'lora_kl' AND json_extract(config, '$.transfer.kl_weight') = 1.0") ==
      2);
  // LoLCATs' published rows are of tasks the smoke profile runs none of: no page of "– / 79.9", exit 1 and why.
  const auto compare = test::run_command(
      fwlab_cmd(fmt::format("table {}/experiments/conversion_eval.toml --profile smoke --db {} --compare",
                            FWLAB_SOURCE_DIR, dir.file("fwlab.db"))));
  INFO(compare.output);
  CHECK(compare.exit_code == 1);
  CHECK_THAT(compare.output, Catch::Contains("no cell has both a value here and the paper's at profile smoke"));
}

TEST_CASE("catalog: t2r_attention at the smoke profile (the teacher against itself is at distance 0)", "[catalog]") {
  test::TempDir dir("t2r_attn");
  run_smoke(dir, {"t2r_attention",
                  {"| stage | m=4, distance | m=4, entropy | m=16, distance | m=16, entropy |",
                   "| T2R before fine-tuning |", "| T2R, feature map frozen |",
                   "Reference: softmax teacher compared with itself: distance 0.000, entropy "},
                  {"vs_m", "vs_m_1"}});
}

TEST_CASE("catalog: sru_attention at the smoke profile", "[catalog]") {
  test::TempDir dir("sru");
  run_smoke(dir,
            {"sru_attention",
             {"| attention | params | test bpc | train tokens/s |", "| k = 10 (last layer only) |", "| No attention |"},
             {"curves"}});
}

TEST_CASE("catalog: mqar at the smoke profile (best learning rate per cell and a softmax reference row)", "[catalog]") {
  test::TempDir dir("mqar");
  const auto md = run_smoke(
      dir, {"mqar",
            {"| rule | pairs=4, m=4 |", "| add |", "| decay |", "| gated_delta |", "| deltanet |", "| softmax |"},
            {"curves_add", "curves_decay", "curves_gated_delta", "curves_deltanet", "curves_column_4_4", "vs_m"}});
  CHECK_THAT(md, Catch::Contains("Cells: test accuracy (best over lr)."));
}

TEST_CASE("catalog: capacity at the smoke profile (retrieval task: accuracy vs pairs with softmax along it)",
          "[catalog]") {
  test::TempDir dir("capacity");
  const auto md = run_smoke(dir, {"capacity",
                                  {"| rule | m | S=2 | S=8 |", "| add | 4 |", "| delta | 4 |", "| gated_delta | 4 |",
                                   "| deltanet | 4 |", "| softmax (keeps every pair) |"},
                                  {"curves_add_4", "curves_delta_4", "curves_gated_delta_4", "curves_deltanet_4",
                                   "curves_column_2", "curves_column_8", "vs_pairs"}});
  CHECK_THAT(md, Catch::Contains("Cells: test accuracy."));
  // The softmax reference runs at each S too: a line along S, not one level.
  const auto gp = test::slurp(dir.file("plots/vs_pairs.gp"));
  CHECK_THAT(gp, Catch::Contains("set xlabel 'S'") && Catch::Contains("t 'softmax (keeps every pair)'") &&
                     !Catch::Contains("reference level"));
}

TEST_CASE("catalog: layer_selection at the smoke profile (derived softmax layers: probes, then hybrids from them)",
          "[catalog]") {
  test::TempDir dir("layer_selection");
  const auto md = run_smoke(dir, {"layer_selection",
                                  {"| rule | selector | 1/8 softmax | 1/2 softmax |", "| decay | kl_guided |",
                                   "Reference: all linear (ratio 0): "},
                                  {"curves_decay_uniform", "curves_decay_transfer_error", "curves_decay_kl_guided",
                                   "curves_column_1", "curves_column_4", "vs_k"}});
  Db db(dir.file("fwlab.db"));
  // Every hybrid cell has its derivation, and the layers a kl_guided cell keeps are its probes' best by valid_kl.
  CHECK(count(db, "SELECT COUNT(*) FROM derivations WHERE stage = 'hybrid'") == 6);
  auto q = db.prepare(
      "SELECT value, record FROM derivations WHERE json_extract(coords, '$.selector') = 'kl_guided' "
      "AND json_extract(coords, '$.k') = 4");
  REQUIRE(q.step());
  const auto record = nlohmann::json::parse(q.text(1));
  std::vector<int64_t> best;
  for (size_t i = 0; i < 4; ++i) best.push_back(record["ranking"][i]["layers"][0].get<int64_t>());
  std::sort(best.begin(), best.end());
  CHECK(nlohmann::json::parse(q.text(0)) == nlohmann::json(best));
  for (size_t i = 1; i < record["ranking"].size(); ++i)  // ascending valid_kl, read from the probes' records
    CHECK(record["ranking"][i - 1]["score"].get<double>() <= record["ranking"][i]["score"].get<double>());
  CHECK(count(db, "SELECT COUNT(*) FROM metrics WHERE key = 'valid_kl'") > 0);
  const auto ranking = test::run_command(
      fwlab_cmd(fmt::format("table {}/experiments/layer_selection.toml --profile smoke --db {} --table ranking",
                            FWLAB_SOURCE_DIR, dir.file("fwlab.db"))));
  CHECK(ranking.exit_code == 0);
  CHECK_THAT(ranking.output,
             Catch::Contains("| probe | decay |") && Catch::Contains("| [7] |") && !Catch::Contains("| – |"));
}

TEST_CASE("catalog: llama_conversion at the smoke profile (transfer then LoRA on a Llama-shaped teacher)",
          "[catalog]") {
  test::TempDir dir("llamaconv");
  const auto md = run_smoke(
      dir, {"llama_conversion",
            {"| rule | attention | after attention transfer | transfer → LoRA |", "| gated_delta | + sliding window |",
             "Reference: softmax Llama-shaped teacher (before conversion): "},
            {"curves_decay_linear", "curves_decay_window", "curves_gated_delta_linear", "curves_gated_delta_window",
             "curves_column_transfer", "curves_column_lora"}});
  Db db(dir.file("fwlab.db"));
  CHECK(count(db, "SELECT COUNT(*) FROM metrics WHERE key LIKE 'transfer_mse.%'") > 0);
  CHECK(count(db,
              "SELECT COUNT(*) FROM jobs WHERE stage = 'lora' AND json_extract(config, '$.train.trainable') = 'lora' "
              "AND json_extract(config, '$.model.n_kv_heads') = 1 AND json_extract(config, '$.model.positions') = "
              "'rope'") == 4);
}

TEST_CASE(
    "catalog: llama_conversion at the smoke profile from a tiny Hugging Face Llama (CI smoke of hf: Llama sweeps)",
    "[catalog]") {
  test::TempDir dir("hfllama");
  const auto hf = dir.path() / "llama-tiny";
  // The smoke profile's sizes, so that the job's model keys restate the checkpoint's configuration.
  const auto py =
      test::run_command(fmt::format("/usr/bin/python3 {}/tests/python/hf_llama.py write {} --vocab 256 --hidden 32 "
                                    "--intermediate 88 --layers 2 --heads 2 --kv-heads 1 --positions 32",
                                    FWLAB_SOURCE_DIR, hf.string()));
  REQUIRE(py.exit_code == 0);
  const auto file = fmt::format("{}/experiments/llama_conversion.toml", FWLAB_SOURCE_DIR);
  const auto args =
      fmt::format("{} --profile smoke --set 'grid.rule=[\"decay\"]' --set stage.teacher.init_checkpoint=hf:{} --db {}",
                  file, hf.string(), dir.file("fwlab.db"));
  const auto sweep = test::run_command(fwlab_cmd("sweep " + args));
  INFO(sweep.output);
  REQUIRE(sweep.exit_code == 0);
  Db db(dir.file("fwlab.db"), true);
  CHECK(count(db, "SELECT COUNT(*) FROM jobs WHERE status = 'finished'") == 5);
  CHECK(count(db, "SELECT COUNT(*) FROM events WHERE type = 'import'") ==
        1);  // the teacher read every tensor of the directory
}

TEST_CASE("catalog: the paper profile of llama_conversion plans Llama 3.2 1B from its config.json", "[catalog]") {
  test::TempDir dir("llamapaper");
  // Llama 3.2 1B's config.json as Hugging Face ships it: the plan needs the sizes only, not the weights.
  test::spit(dir.file("config.json"),
             R"({"architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32,
    "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 32.0,
    "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.45.0.dev0",
    "use_cache": true, "vocab_size": 128256})");
  const auto file = fmt::format("{}/experiments/llama_conversion.toml", FWLAB_SOURCE_DIR);
  const auto set = fmt::format(" --set stage.teacher.init_checkpoint=hf:{}", dir.path().string());
  const auto dry = test::run_command(
      fwlab_cmd(fmt::format("sweep {} --profile paper{} --dry-run --db {}", file, set, dir.file("x.db"))));
  INFO(dry.output);
  CHECK(dry.exit_code == 0);
  // 1,235,814,400: Llama 3.2 1B (tied head); the teacher's KV cache at 1,024 tokens: 16 layers x 2 x 8 heads x 64 x
  // 1,024.
  CHECK_THAT(dry.output,
             Catch::Contains("teacher    -") && Catch::Contains("1,235,814,400") && Catch::Contains("16.8M"));
}

TEST_CASE("catalog: every profile of every experiment file expands without error", "[catalog]") {
  for (const auto& entry : fs::directory_iterator(fs::path(FWLAB_SOURCE_DIR) / "experiments")) {
    if (entry.path().extension() != ".toml") continue;
    for (const std::string profile : {"smoke", "quick", "paper"}) {
      const auto r = test::run_command(fwlab_cmd(
          fmt::format("sweep {} --profile {} --dry-run --db /nonexistent/fwlab.db", entry.path().string(), profile)));
      INFO(entry.path().filename().string() << " " << profile << ": " << r.output);
      CHECK(r.exit_code == 0);
    }
    // Each file says what it reproduces and what differs at quick scale.
    const auto text = test::slurp(entry.path().string());
    CHECK(text.rfind("# ", 0) == 0);
    CHECK_THAT(text, Catch::Contains("quick"));
  }
}

TEST_CASE("catalog: every axis of every experiment file takes a one-value subset with --set grid.AXIS=(one value)",
          "[catalog]") {
  // Rules, table rows and published numbers about the values left out are set aside, never an error.
  for (const auto& entry : fs::directory_iterator(fs::path(FWLAB_SOURCE_DIR) / "experiments")) {
    if (entry.path().extension() != ".toml") continue;
    const auto ex = load_experiment(entry.path().string(), "quick");
    for (const auto& axis : ex.axes) {
      if (axis.values.size() < 2) continue;
      const auto set = fmt::format("'grid.{}=[{}]'", axis.name, axis.values.back().dump());
      const auto r = test::run_command(fwlab_cmd(fmt::format(
          "sweep {} --profile quick --set {} --dry-run --db /nonexistent/fwlab.db", entry.path().string(), set)));
      INFO(entry.path().filename().string() << " --set " << set << ": " << r.output);
      CHECK(r.exit_code == 0);
    }
  }
}

TEST_CASE("catalog: the paper profiles fine-tune GPT-2 small from an hf: directory the user names with --set",
          "[catalog]") {
  test::TempDir dir("paper");
  // GPT-2 small's config.json as Hugging Face ships it: the plan needs the sizes only, not the weights.
  test::spit(dir.file("config.json"),
             R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
    "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
    "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1,
    "summary_activation": null, "summary_first_dropout": 0.1, "summary_proj_to_labels": true, "summary_type": "cls_index",
    "summary_use_proj": true, "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}}, "vocab_size": 50257})");
  for (const char* name : {"table1", "table2"}) {
    const auto file = fmt::format("{}/experiments/{}.toml", FWLAB_SOURCE_DIR, name);
    const auto set = fmt::format(" --set stage.pretrain.init_checkpoint=hf:{}", dir.path().string());
    const auto dry = test::run_command(
        fwlab_cmd(fmt::format("sweep {} --profile paper{} --dry-run --db {}", file, set, dir.file("x.db"))));
    INFO(dry.output);
    CHECK(dry.exit_code == 0);
    CHECK_THAT(dry.output,
               Catch::Contains("pretrain   -") && Catch::Contains("124,439,808"));  // GPT-2 small, output tied
    // Without the paths the input check names the keys to set, and runs nothing.
    const auto run = test::run_command(
        fwlab_cmd(fmt::format("sweep {} --profile paper --db {} --worker /bin/false", file, dir.file("x.db"))));
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.output, Catch::Contains("defaults.data.path: /path/to/prepared/corpus does not exist") &&
                               Catch::Contains("stage.pretrain.init_checkpoint: /path/to/gpt2: not a directory"));
    CHECK(!fs::exists(dir.file("x.db")));
  }
}

TEST_CASE("catalog: table2 at the smoke profile from a tiny Hugging Face GPT-2 (CI smoke of hf: sweeps)", "[catalog]") {
  test::TempDir dir("hfsweep");
  const auto hf = dir.path() / "gpt2-tiny";
  const auto py = test::run_command(
      fmt::format("/usr/bin/python3 {}/tests/python/hf_gpt2.py write {} --no-expected --vocab 256 --embd 32 "
                  "--heads 2 --layers 2 --positions 32",
                  FWLAB_SOURCE_DIR, hf.string()));
  REQUIRE(py.exit_code == 0);
  const auto file = fmt::format("{}/experiments/table2.toml", FWLAB_SOURCE_DIR);
  const auto args = fmt::format("{} --profile smoke --set stage.pretrain.init_checkpoint=hf:{} --db {}", file,
                                hf.string(), dir.file("fwlab.db"));
  const auto sweep = test::run_command(fwlab_cmd("sweep " + args));
  INFO(sweep.output);
  REQUIRE(sweep.exit_code == 0);
  const auto table = test::run_command(fwlab_cmd("table " + args));
  INFO(table.output);
  CHECK(table.exit_code == 0);
  for (const char* row : {"| Softmax, fine-tuned the same steps (control) |", "| Local attention (w = 32) |",
                          "| Gated |", "| Decay |", "| Gated delta (not in the paper) |"})
    CHECK_THAT(table.output, Catch::Contains(row));
  for (const std::string marker : {"| – |", "| … |", "| ! |"}) CHECK_THAT(table.output, !Catch::Contains(marker));
  Db db(dir.file("fwlab.db"), true);
  CHECK(count(db, "SELECT COUNT(*) FROM jobs WHERE status = 'finished'") == 9);
  CHECK(count(db, "SELECT COUNT(*) FROM sweeps WHERE command LIKE '%--set stage.pretrain.init_checkpoint=hf:%'") == 1);
}
