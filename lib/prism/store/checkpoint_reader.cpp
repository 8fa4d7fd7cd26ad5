#include "prism/store/checkpoint_reader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>

#include "prism/error.h"
#include "prism/store/safetensors.h"

namespace fs = std::filesystem;

namespace prism {

const char* const kCheckpointFormat = "prism-gpt-1";

namespace {

std::string read_name(const std::string& path) {
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

std::string checkpoint_model_file(const std::string& path) {
  const fs::path p(path);
  if (fs::is_regular_file(p)) return p.string();
  if (fs::exists(p / "model.safetensors")) return (p / "model.safetensors").string();
  if (auto ckpt = latest_checkpoint(path)) return (fs::path(*ckpt) / "model.safetensors").string();
  throw Error("no checkpoint found", path,
              "pass a run directory with checkpoints/, a checkpoint directory or a model.safetensors file");
}

std::optional<std::string> latest_checkpoint(const std::string& run_dir) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  std::string name = read_name((root / "latest").string());
  if (name.empty()) return std::nullopt;
  fs::path dir = root / name;
  if (!fs::exists(dir / "model.safetensors") || !fs::exists(dir / "state.safetensors")) return std::nullopt;
  return dir.string();
}

void load_weights(GPT& model, const std::string& path) {
  auto st = load_safetensors(path);
  torch::NoGradGuard ng;
  for (auto& p : model->named_parameters()) {
    const auto& t = st.at(p.key());
    if (t.sizes() != p.value().sizes())
      throw Error(fmt::format("tensor '{}' has shape {} in the checkpoint but {} in the model", p.key(),
                              fmt::join(t.sizes().vec(), "x"), fmt::join(p.value().sizes().vec(), "x")),
                  path, "load it with the config and schedule it was trained with");
    p.value().copy_(t);
  }
}

LoadedModel load_model(const std::string& path) {
  const std::string file = checkpoint_model_file(path);
  auto meta = load_safetensors(file).metadata;
  if (meta["format"] != kCheckpointFormat)
    throw Error("not a Prism checkpoint (missing format metadata)", file, "pass a model.safetensors written by prism train");
  LoadedModel lm;
  lm.path = file;
  lm.config = parse_config(YAML::Load(meta["config"]), file + " (embedded config)");
  lm.step = std::stoll(meta["step"]);
  lm.model = GPT(lm.config.model, lm.config.schedule);
  load_weights(lm.model, file);
  return lm;
}

}  // namespace prism
