#pragma once
// `prism export RUN --hf DIR`: a checkpoint as a Hugging Face model directory,
// loadable by transformers with no Prism installed.
//   config.json            the shape, one head count per layer (`heads`), the
//                          end-of-text id, and a `prism` block (source
//                          checkpoint, step, schedule, vocabulary)
//   model.safetensors      the weights (metadata format "pt", as transformers wants)
//   generation_config.json end-of-text as bos/eos/pad
//   tokenizer files        hf_tokenizer.h, from the run's vocabulary
//   README.md              a model card: what it is and how to load it
// Two formats:
//   prism  PrismForCausalLM (modeling_prism.py + configuration_prism.py, loaded
//          with trust_remote_code=True): any schedule; tensors under Prism's own
//          names (transformer.h.N.attn.c_attn.weight, ...) unchanged.
//   gpt2   the stock GPT2LMHeadModel, no remote code: uniform schedules only;
//          Linear weights transposed to GPT-2's Conv1D layout, and zero biases
//          written for a model trained without them (the same function).
// The directory appears whole or not at all: files are written to a sibling
// temporary directory that is renamed into place.
#include <optional>
#include <string>
#include <vector>

#include "prism/export/hf_tokenizer.h"
#include "prism/store/checkpoint_reader.h"

namespace prism {

enum class HfFormat { Prism, Gpt2 };

HfFormat parse_hf_format(const std::string& name);  // "prism" | "gpt2"; throws prism::Error
std::string hf_format_name(HfFormat f);

struct HfExportOptions {
  HfFormat format = HfFormat::Prism;
  std::string vocab;   // tiktoken ranks file of the model's vocabulary (required)
  bool force = false;  // replace an existing non-empty DIR
};

struct HfExportSummary {
  std::string dir;
  HfFormat format = HfFormat::Prism;
  std::vector<std::string> files;  // written, in order
  std::string vocab;               // the ranks file the tokenizer came from
  int tokenizer_ids = 0;           // ranks + end-of-text
  int merges = 0, unmerged = 0;
  int64_t tensors = 0, parameters = 0;
};

// The vocabulary file a checkpoint's run names: its data.vocab (which a run
// resolves from its corpus's prepare.json when it starts), else the one the
// prepare.json of its data.dir names; nullopt when it names none (then GPT-2's
// is the default).
std::optional<std::string> run_vocabulary(const LoadedModel& model);

// Throws prism::Error, before writing anything, when DIR exists and is not empty
// (without force), when the format cannot hold the model (gpt2 and a non-uniform
// schedule), or when the vocabulary has more ids than the model.
HfExportSummary export_hf(const LoadedModel& model, const std::string& dir, const HfExportOptions& options);

}  // namespace prism
