// `fwlab-worker generate`: text in, text out, from an fwlab checkpoint or a Hugging Face GPT-2 directory.
#pragma once

#include <cstdint>
#include <string>

#include "models/generate.h"

namespace fwlab {

struct GenerateArgs {
  std::string checkpoint;  // file.safetensors or hf:DIR
  std::string prompt;
  SamplingOptions sampling;
  std::string tokenizer;  // byte | gpt2 | hf:DIR; "" = the checkpoint's (its metadata, the hf: directory's own files,
                          // its vocabulary)
  std::string bpe_dir;    // encoder.json + vocab.bpe (or vocab.json + merges.txt); "" = the checkpoint's or the repo's
  std::string dtype = "float32";  // what the model computes in: float32 | bfloat16 | float16 | file (model.dtype)
  std::string device = "cpu";
  int64_t threads = 0;
};

// Prints the continuation on stdout, then tokens/s and the state per sequence on stderr. Returns the exit code
// (2 with a message naming the argument at fault).
int run_generate(const GenerateArgs& args, const std::string& repo_root);

}  // namespace fwlab
