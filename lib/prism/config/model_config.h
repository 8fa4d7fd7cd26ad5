#pragma once
// The shape of a GPT model. The head count per layer lives in the HeadSchedule;
// n_head here is the baseline count h_base (the uniform model's count).
#include <string>
#include <vector>

namespace prism {

// How the model knows where a token is: GPT-2's learned table added to the token
// embedding (`wpe`), or rotary embedding of each layer's queries and keys at its
// own head width (ops/rope.h).
enum class Positions { Learned, Rope };
const char* positions_name(Positions p);  // "learned" | "rope"

struct ModelConfig {
  std::string preset;      // the preset it started from, "" if none
  int n_layer = 12;
  int d_model = 768;
  int n_head = 12;         // baseline heads h_base
  int block_size = 1024;   // maximum context T (with rope: the trained context; longer inputs run)
  // `vocab_size: auto` (the default; vocab_from_data) takes the training data's
  // vocabulary from its prepare.json when the config is composed (resolve_vocabulary
  // in data/dataset.h; the config still reads `auto`); until then, and for data
  // without a manifest (llm.c's shards), vocab_size is the preset's: GPT-2's. A run
  // records the number (resolve_data_settings clears vocab_from_data).
  int vocab_size = 50257;  // GPT-2 BPE + EOT
  bool vocab_from_data = true;
  bool bias = true;
  double dropout = 0.0;
  Positions position = Positions::Learned;  // model.position: learned | rope
  double rope_theta = 10000.0;              // model.rope_theta: the base of the rotary frequencies

  int head_dim_base() const { return d_model / n_head; }
};

struct ModelPreset {
  std::string name;
  std::string description;
  ModelConfig config;
};

// Built-in shapes: the paper's three scales and small CPU-sized ones.
const std::vector<ModelPreset>& model_presets();
// Throws prism::Error listing the known names.
ModelConfig model_preset(const std::string& name);

// The paper's effect (uniform - Prism validation loss, nats) at a model preset's scale:
// gpt2-124m 0.0144 (3.3748 - 3.3604), prism-757m 0.0084 (2.8106 - 2.8022), gpt2-354m 0.0084
// (the paper gives none there: the smaller of the two); any other model 0.01, the CPU study's
// target. The default equivalence margin of `prism report` and target of a dry run's power plan;
// `source` says where the figure comes from, in words.
struct PaperEffect {
  double nats = 0;
  std::string source;
};
PaperEffect paper_effect(const std::string& preset);

// Shape checks independent of the schedule (d_model % n_head, positive sizes, rope_theta > 0).
void validate_model_config(const ModelConfig& m, const std::string& where);

// With rotary positions every layer's head width d_model / heads[l] must be even
// (its pairs turn together); throws prism::Error naming the layer otherwise.
void require_rope_head_widths(const ModelConfig& m, const std::vector<int>& heads, const std::string& where);

}  // namespace prism
