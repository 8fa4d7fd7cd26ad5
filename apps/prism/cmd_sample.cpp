// prism sample CHECKPOINT --prompt TEXT: text from a trained model.
#include <fmt/format.h>

#include <iostream>

#include "cli.h"
#include "trained_model_options.h"
#include "prism/data/dataset.h"
#include "prism/data/tokenizer.h"
#include "prism/error.h"
#include "prism/model/sample.h"
#include "prism/store/checkpoint_reader.h"

#include <filesystem>

namespace prism::cli {
namespace {

// Bytes at the end of `s` that start a UTF-8 character not yet complete.
size_t utf8_incomplete_tail(const std::string& s) {
  for (size_t back = 1; back <= 4 && back <= s.size(); ++back) {
    auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

const char* kUsage =
    "CHECKPOINT --prompt TEXT [options]\n\n"
    "CHECKPOINT is a run directory (its newest checkpoint), a checkpoint directory or a\n"
    "model.safetensors file. Text streams to stdout as it is drawn. The model runs on\n"
    "--device with --backend, whatever back end it trained with.\n\n"
    "example:\n"
    "  prism sample runs/demo --prompt \"It is a truth universally acknowledged\" --tokens 60 --top-k 40";

int run(const std::vector<std::string>& args) {
  return guarded("sample", [&]() -> int {
    po::options_description o("Options");
    o.add_options()
        ("checkpoint", po::value<std::string>(), "run dir, checkpoint dir or model.safetensors")
        ("prompt,p", po::value<std::string>()->default_value("\n"), "prompt text")
        ("tokens,n", po::value<int64_t>()->default_value(100), "new tokens per sample")
        ("temperature,t", po::value<double>()->default_value(0.8), "sampling temperature (0: greedy)")
        ("top-k,k", po::value<int64_t>()->default_value(40), "sample among the k most likely tokens (0: all)")
        ("samples", po::value<int>()->default_value(1), "number of samples")
        ("seed", po::value<uint64_t>()->default_value(0), "random seed")
        ("vocab", po::value<std::string>(), "the tokenizer's ranks file (default: the one the model trained with)");
    add_trained_model_options(o);
    po::positional_options_description pos;
    pos.add("checkpoint", 1);
    po::variables_map vm;
    if (!parse("sample", kUsage, o, pos, args, vm)) return 0;
    if (!vm.count("checkpoint")) throw Error("no checkpoint given", "prism sample", "pass a run directory, e.g. prism sample runs/demo");
    const Placement placement = apply_trained_model_options(vm);
    auto lm = load_model(vm["checkpoint"].as<std::string>());
    lm.model->to(placement.device);
    if (lm.config.data.vocab.empty() && !vm.count("vocab")) lm.config.data.vocab = vocab_path();
    Gpt2Tokenizer tok = open_tokenizer(lm.config, vm.count("vocab") ? vm["vocab"].as<std::string>() : "");
    std::vector<int64_t> prompt;
    for (auto id : tok.encode(vm["prompt"].as<std::string>())) prompt.push_back(id);
    std::cerr << fmt::format("model {} (step {}), heads {}, {}\n", lm.path, lm.step, lm.config.schedule.compact(),
                             placement.describe());
    for (int s = 0; s < vm["samples"].as<int>(); ++s) {
      SampleOptions so;
      so.max_new_tokens = vm["tokens"].as<int64_t>();
      so.temperature = vm["temperature"].as<double>();
      so.top_k = vm["top-k"].as<int64_t>();
      so.seed = vm["seed"].as<uint64_t>() + static_cast<uint64_t>(s);
      so.backend = placement.backend;
      std::cout << vm["prompt"].as<std::string>();
      // Decode the growing sequence and print what is new, so multi-token UTF-8 characters come out whole.
      std::vector<TokenId> drawn;
      std::string shown;
      sample(lm.model, prompt, so, [&](int64_t id) {
        drawn.push_back(static_cast<TokenId>(id));
        std::string text = tok.decode(drawn);
        size_t complete = text.size() - utf8_incomplete_tail(text);
        if (complete > shown.size()) {
          std::cout << text.substr(shown.size(), complete - shown.size()) << std::flush;
          shown = text.substr(0, complete);
        }
      });
      std::cout << "\n" << (s + 1 < vm["samples"].as<int>() ? "---\n" : "");
    }
    return 0;
  });
}

const Registration reg{{40, "sample", "generate text from a checkpoint (temperature, top-k)", run}};

}  // namespace
}  // namespace prism::cli
