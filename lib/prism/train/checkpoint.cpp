#include "prism/train/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>

#include "prism/atomic_file.h"
#include "prism/error.h"
#include "prism/store/safetensors.h"

namespace fs = std::filesystem;

namespace prism {

namespace {

torch::optim::AdamWParamState* adam_state(torch::optim::AdamW& opt, const torch::Tensor& p) {
  auto it = opt.state().find(p.unsafeGetTensorImpl());
  if (it == opt.state().end()) return nullptr;
  return static_cast<torch::optim::AdamWParamState*>(it->second.get());
}

const std::string kExtraPrefix = "extra.";

std::string heads_text(const HeadSchedule& s) { return fmt::format("{}", fmt::join(s.heads(), ",")); }

// The random streams a run draws from: the CPU generator (initialisation, CPU
// dropout) and, when the model is on a GPU, that device's generator (dropout
// there). A state key missing from an older checkpoint, or the CUDA state of a
// GPU run resumed on the CPU, leaves that generator as seeded.
std::vector<std::pair<std::string, at::Generator>> run_generators(GPT& model) {
  std::vector<std::pair<std::string, at::Generator>> gens{{"rng.cpu", at::detail::getDefaultCPUGenerator()}};
  const auto params = model->parameters();
  if (!params.empty() && params.front().is_cuda())
    gens.emplace_back("rng.cuda", at::globalContext().defaultGenerator(params.front().device()));
  return gens;
}

}  // namespace

std::string save_checkpoint(const std::string& run_dir, GPT& model, torch::optim::AdamW& opt,
                            const TrainerState& st, const std::string& config_yaml, int keep,
                            const CheckpointExtra* extra) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  const std::string name = fmt::format("step_{:06d}", st.step);
  const fs::path dir = root / name;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("cannot create checkpoint directory: {}", ec.message()), dir.string(), "check permissions and free space");
  try {
    // Weights, readable without Prism.
    NamedTensors weights;
    for (const auto& p : model->named_parameters()) weights.emplace_back(p.key(), p.value().detach().to(torch::kCPU));
    save_safetensors((dir / "model.safetensors").string(), weights,
                     {{"format", kCheckpointFormat}, {"config", config_yaml}, {"heads", heads_text(model->schedule())},
                      {"step", std::to_string(st.step)}, {"prism_version", PRISM_VERSION}});
    // Trainer state.
    NamedTensors state;
    int64_t adam_step = 0;
    for (const auto& p : model->named_parameters()) {
      if (auto* s = adam_state(opt, p.value())) {
        state.emplace_back("adam.exp_avg." + p.key(), s->exp_avg());
        state.emplace_back("adam.exp_avg_sq." + p.key(), s->exp_avg_sq());
        adam_step = s->step();
      }
    }
    for (auto& [key, gen] : run_generators(model)) {
      std::lock_guard<std::mutex> lock(gen.mutex());
      state.emplace_back(key, gen.get_state());
    }
    nlohmann::json j = {{"step", st.step},
                        {"tokens", st.tokens},
                        {"elapsed_s", st.elapsed_s},
                        {"loader", {{"seed", st.loader.seed}, {"epoch", st.loader.epoch}, {"position", st.loader.position},
                                    {"fingerprint", st.loader.fingerprint}, {"batch_windows", st.loader.batch_windows}}},
                        {"best_val_loss", std::isfinite(st.best_val_loss) ? nlohmann::json(st.best_val_loss) : nlohmann::json()},
                        {"best_val_step", st.best_val_step},
                        {"world_size", st.world_size},
                        {"adam_step", adam_step}};
    std::map<std::string, std::string> meta{{"format", kCheckpointFormat}, {"trainer_state", j.dump()}};
    if (extra) {
      for (const auto& t : extra->tensors) state.emplace_back(kExtraPrefix + t.first, t.second.detach().to(torch::kCPU));
      meta["extra_state"] = extra->text;
    }
    save_safetensors((dir / "state.safetensors").string(), state, meta);
    write_file_atomic((root / "latest").string(), name + "\n");
  } catch (...) {
    // Leave the previous checkpoint in charge; remove the partial one.
    if (latest_checkpoint(run_dir) != dir.string()) fs::remove_all(dir, ec);
    throw;
  }
  // Prune older checkpoints beyond `keep`.
  std::vector<fs::path> all;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory() && e.path().filename().string().rfind("step_", 0) == 0) all.push_back(e.path());
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i + static_cast<size_t>(std::max(keep, 1)) < all.size(); ++i) fs::remove_all(all[i], ec);
  return dir.string();
}

void load_checkpoint(const std::string& ckpt_dir, GPT& model, torch::optim::AdamW& opt, TrainerState& st,
                     CheckpointExtra* extra) {
  const std::string model_path = (fs::path(ckpt_dir) / "model.safetensors").string();
  const std::string state_path = (fs::path(ckpt_dir) / "state.safetensors").string();
  auto meta = load_safetensors(model_path).metadata;
  if (meta["heads"] != heads_text(model->schedule()))
    throw Error(fmt::format("the checkpoint's schedule [{}] differs from the config's [{}]", meta["heads"],
                            heads_text(model->schedule())),
                model_path, "resume with the config the run was started with");
  load_weights(model, model_path);
  auto state = load_safetensors(state_path);
  if (extra) {
    auto it = state.metadata.find("extra_state");
    if (it == state.metadata.end())
      throw Error("the checkpoint has no extra state (it was saved by a run of another kind)", state_path,
                  "resume it with the command that started it (prism train or prism search)");
    extra->text = it->second;
    extra->tensors.clear();
    for (const auto& kv : state.tensors)
      if (kv.first.rfind(kExtraPrefix, 0) == 0) extra->tensors.emplace_back(kv.first.substr(kExtraPrefix.size()), kv.second);
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(state.metadata.at("trainer_state"));
  } catch (const std::exception& e) {
    throw Error(fmt::format("trainer state is unreadable ({})", e.what()), state_path, "resume from another checkpoint");
  }
  st.step = j.at("step");
  st.tokens = j.at("tokens");
  st.elapsed_s = j.at("elapsed_s");
  st.loader.seed = j.at("loader").at("seed");
  st.loader.epoch = j.at("loader").at("epoch");
  st.loader.position = j.at("loader").at("position");
  st.loader.fingerprint = j.at("loader").value("fingerprint", uint64_t{0});
  st.loader.batch_windows = j.at("loader").value("batch_windows", uint64_t{0});
  st.best_val_loss = j.at("best_val_loss").is_null() ? std::numeric_limits<double>::infinity() : j.at("best_val_loss").get<double>();
  st.best_val_step = j.at("best_val_step");
  st.world_size = j.at("world_size");
  const int64_t adam_step = j.at("adam_step");
  torch::NoGradGuard ng;
  for (auto& p : model->named_parameters()) {
    std::string a = "adam.exp_avg." + p.key();
    bool present = false;
    for (const auto& kv : state.tensors) present = present || kv.first == a;
    if (!present) continue;
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    s->step(adam_step);
    s->exp_avg(state.at(a).to(p.value().device()).clone());
    s->exp_avg_sq(state.at("adam.exp_avg_sq." + p.key()).to(p.value().device()).clone());
    opt.state()[p.value().unsafeGetTensorImpl()] = std::move(s);
  }
  for (auto& entry : run_generators(model)) {
    const std::string& key = entry.first;  // a plain reference: C++17 lambdas cannot capture structured bindings
    auto& gen = entry.second;
    const bool saved = std::any_of(state.tensors.begin(), state.tensors.end(), [&](const auto& kv) { return kv.first == key; });
    if (key != "rng.cpu" && !saved) continue;
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state.at(key));
  }
}

}  // namespace prism
