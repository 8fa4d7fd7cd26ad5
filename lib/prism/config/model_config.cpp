#include "prism/config/model_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "prism/error.h"

namespace prism {

namespace {
ModelConfig shape(const char* name, int L, int d, int h, int T, int V = 50257) {
  ModelConfig m;
  m.preset = name;
  m.n_layer = L;
  m.d_model = d;
  m.n_head = h;
  m.block_size = T;
  m.vocab_size = V;
  return m;
}
}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      {"gpt2-124m", "paper 124M: 12 layers x 768, 12 heads (d_h 64), context 1024", shape("gpt2-124m", 12, 768, 12, 1024)},
      {"gpt2-354m", "paper 354M: 24 layers x 1024, 16 heads (d_h 64), context 1024", shape("gpt2-354m", 24, 1024, 16, 1024)},
      {"prism-757m", "paper 757M: 24 layers x 1536, 24 heads (d_h 64), context 1024", shape("prism-757m", 24, 1536, 24, 1024)},
      {"cpu-128", "CPU study: 6 layers x 128, 4 heads (d_h 32), context 256", shape("cpu-128", 6, 128, 4, 256)},
      {"cpu-192", "CPU study: 6 layers x 192, 6 heads (d_h 32), context 256", shape("cpu-192", 6, 192, 6, 256)},
      {"cpu-256", "CPU study: 8 layers x 256, 8 heads (d_h 32), context 256", shape("cpu-256", 8, 256, 8, 256)},
      {"test-tiny", "unit tests: 2 layers x 64, 4 heads, context 32, vocab 512", shape("test-tiny", 2, 64, 4, 32, 512)},
      {"study-tiny", "the paper's 124M study in miniature (CI): 12 layers x 96, 12 heads (d_h 8), context 64",
       shape("study-tiny", 12, 96, 12, 64)},
  };
  return presets;
}

const char* positions_name(Positions p) { return p == Positions::Rope ? "rope" : "learned"; }

ModelConfig model_preset(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& p : model_presets()) {
    if (p.name == name) return p.config;
    names.push_back(p.name);
  }
  throw Error(fmt::format("unknown model preset '{}'", name), "model.preset",
              fmt::format("use one of: {}", fmt::join(names, ", ")));
}

void validate_model_config(const ModelConfig& m, const std::string& where) {
  auto positive = [&](const char* key, long long v) {
    if (v <= 0)
      throw Error(fmt::format("model.{} must be positive, got {}", key, v), where, fmt::format("set model.{} > 0", key));
  };
  positive("n_layer", m.n_layer);
  positive("d_model", m.d_model);
  positive("n_head", m.n_head);
  positive("block_size", m.block_size);
  positive("vocab_size", m.vocab_size);
  if (m.d_model % m.n_head != 0)
    throw Error(fmt::format("model.n_head = {} does not divide model.d_model = {}", m.n_head, m.d_model), where,
                "choose a baseline head count that divides d_model");
  if (!(m.dropout >= 0.0 && m.dropout < 1.0))
    throw Error(fmt::format("model.dropout = {} is outside [0, 1)", m.dropout), where, "use a dropout in [0, 1)");
  if (!(m.rope_theta > 0.0))
    throw Error(fmt::format("model.rope_theta = {} is not positive", m.rope_theta), where,
                "use a positive base such as 10000 (Llama 2) or 500000 (Llama 3)");
}

void require_rope_head_widths(const ModelConfig& m, const std::vector<int>& heads, const std::string& where) {
  if (m.position != Positions::Rope) return;
  for (size_t l = 0; l < heads.size(); ++l)
    if (heads[l] > 0 && (m.d_model / heads[l]) % 2 != 0)
      throw Error(fmt::format("layer {} has {} heads of width {}: rotary positions turn pairs of a head's dimensions, "
                              "so every head width must be even",
                              l, heads[l], m.d_model / heads[l]),
                  where, "choose head counts that leave an even head width, or model.position: learned");
}

PaperEffect paper_effect(const std::string& preset) {
  if (preset == "gpt2-124m" || preset == "prism-757m")
    return {preset == "gpt2-124m" ? 0.0144 : 0.0084, "the paper's effect at " + preset};
  if (preset == "gpt2-354m") return {0.0084, "the paper's 757M effect: it gives none at 354M"};
  return {0.01, "the CPU study's target; no paper scale"};
}

}  // namespace prism
