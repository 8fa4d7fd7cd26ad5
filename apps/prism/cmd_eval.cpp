// prism eval CHECKPOINT --task TASK --data FILE: zero-shot multiple-choice accuracy.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>

#include "cli.h"
#include "prism/analysis/result_store.h"
#include "prism/data/dataset.h"
#include "prism/data/tokenizer.h"
#include "prism/error.h"
#include "prism/eval/evaluate.h"
#include "prism/atomic_file.h"
#include "prism/store/checkpoint_reader.h"
#include "support_paths.h"

namespace prism::cli {
namespace {

const char* kUsage =
    "CHECKPOINT --task hellaswag|piqa|arc_easy|winogrande --data FILE [options]\n\n"
    "Scores each choice by the model's log-likelihood of its continuation and reports acc\n"
    "and acc_norm with lm-evaluation-harness's conventions (acc_norm divides by the answer's\n"
    "UTF-8 bytes; WinoGrande by partial scoring). Results go to the run's run.h5 under\n"
    "/eval/<task> (or --out). Task files are the public ones (docs/analysis.md says where to\n"
    "get them): HellaSwag hellaswag_val.jsonl, PIQA valid.jsonl + valid-labels.lst (--labels),\n"
    "ARC-Easy ARC-Easy-Test.jsonl, WinoGrande dev.jsonl.\n\n"
    "examples:\n"
    "  prism eval runs/prism --task hellaswag --data tasks/hellaswag_val.jsonl\n"
    "  prism eval runs/prism --task piqa --data tasks/valid.jsonl --labels tasks/valid-labels.lst";

// $PRISM_VOCAB, ./data/cache/gpt2.tiktoken, or the source tree's copy.
std::string vocab_path() {
  std::string p = default_vocab_path();
  if (std::getenv("PRISM_VOCAB") || std::filesystem::exists(p)) return p;
  return reference_source_dir() + "/data/cache/gpt2.tiktoken";
}

int run(const std::vector<std::string>& args) {
  return guarded("eval", [&]() -> int {
    po::options_description o("Options");
    o.add_options()
        ("checkpoint", po::value<std::string>(), "run dir, checkpoint dir or model.safetensors")
        ("task,t", po::value<std::string>(), "hellaswag | piqa | arc_easy | winogrande")
        ("data,d", po::value<std::string>(), "the task's jsonl file")
        ("labels", po::value<std::string>(), "piqa: the labels file (one 0/1 per line)")
        ("limit", po::value<int64_t>()->default_value(0), "score only the first N items (0: all)")
        ("on-error", po::value<std::string>()->default_value("stop"), "malformed lines: stop | skip (reported)")
        ("batch-tokens", po::value<int64_t>()->default_value(4096), "padded tokens per forward pass")
        ("dump", po::value<std::string>(), "write every choice's tokens and log-likelihood to this JSON file")
        ("out", po::value<std::string>(), "write /eval/<task> to this HDF5 file instead of the run's run.h5")
        ("no-store", po::bool_switch(), "print only; write no HDF5")
        ("vocab", po::value<std::string>(), "the tokenizer's ranks file (default: the one the model trained with)")
        ("threads", po::value<int>()->default_value(0), "intra-op threads (0: all cores)");
    po::positional_options_description pos;
    pos.add("checkpoint", 1);
    po::variables_map vm;
    if (!parse("eval", kUsage, o, pos, args, vm)) return 0;
    if (!vm.count("checkpoint")) throw Error("no checkpoint given", "prism eval", "pass a run directory, e.g. prism eval runs/demo ...");
    if (!vm.count("task")) throw Error("no task given", "--task", "pass --task hellaswag|piqa|arc_easy|winogrande");
    if (!vm.count("data")) throw Error("no task file given", "--data", "pass the task's jsonl file (docs/analysis.md)");
    const Task task = parse_task(vm["task"].as<std::string>());
    const std::string on_error = vm["on-error"].as<std::string>();
    if (on_error != "stop" && on_error != "skip")
      throw Error(fmt::format("unknown --on-error '{}'", on_error), "--on-error", "use stop or skip");
    if (task == Task::Piqa && vm.count("labels") == 0)
      std::cerr << "note: no --labels file: every PIQA line must carry a 'label' field\n";
    const std::string checkpoint = vm["checkpoint"].as<std::string>();
    const bool store_results = !vm["no-store"].as<bool>();
    const std::string store_path =
        store_results ? result_store_path(checkpoint, vm.count("out") ? vm["out"].as<std::string>() : "", "prism eval")
                      : "";
    if (int t = vm["threads"].as<int>(); t > 0) torch::set_num_threads(t);

    TaskReadOptions ro;
    ro.labels_path = vm.count("labels") ? vm["labels"].as<std::string>() : "";
    ro.skip_bad = on_error == "skip";
    ro.limit = vm["limit"].as<int64_t>();
    const std::string data_path = vm["data"].as<std::string>();
    TaskData data = read_task(task, data_path, ro);
    for (const auto& s : data.skipped) std::cerr << "skipped " << s << "\n";

    LoadedModel lm = load_model(checkpoint);
    if (store_results) check_result_store(store_path, lm.config.schedule.heads());
    if (lm.config.data.vocab.empty() && !vm.count("vocab")) lm.config.data.vocab = vocab_path();
    Gpt2Tokenizer tok = open_tokenizer(lm.config, vm.count("vocab") ? vm["vocab"].as<std::string>() : "");
    lm.model->attention_options().backend = attention::parse_backend(lm.config.attention.backend);
    size_t requests = 0;
    for (const auto& item : data.items) requests += item.choices.size();
    std::cerr << fmt::format("eval {}: {} items ({} requests, {} skipped) from {}, model {} (step {}, heads [{}]), "
                             "threads {}\n",
                             task_name(task), data.items.size(), requests, data.skipped.size(), data_path, lm.path,
                             lm.step, fmt::join(lm.config.schedule.heads(), ","), torch::get_num_threads());
    ScoreOptions so;
    so.batch_tokens = vm["batch-tokens"].as<int64_t>();
    const bool tty = ::isatty(STDERR_FILENO);
    const auto start = std::chrono::steady_clock::now();
    auto last = start - std::chrono::hours(1);
    so.progress = [&](int64_t done, int64_t total) {
      auto now = std::chrono::steady_clock::now();
      if (done < total && now - last < std::chrono::seconds(tty ? 1 : 10)) return;
      last = now;
      double s = std::chrono::duration<double>(now - start).count();
      std::cerr << (tty ? "\r" : "")
                << fmt::format("eval {}: {}/{} requests, {:.1f} s, ETA {:.0f} s", task_name(task), done, total, s,
                               done ? s * static_cast<double>(total - done) / static_cast<double>(done) : 0.0)
                << (tty && done < total ? "" : "\n") << std::flush;
    };
    TaskEvaluation e = evaluate_task(lm.model, tok, task, std::move(data.items), so);
    const Accuracy& a = e.accuracy;
    std::cout << fmt::format("{}: acc {:.4f} +- {:.4f}, acc_norm {:.4f} +- {:.4f}, n {}\n", task_name(task), a.acc,
                             a.acc_stderr, a.acc_norm, a.acc_norm_stderr, a.n)
              << "(" << task_convention(task) << ")\n";
    if (vm.count("dump")) {
      write_file_atomic(vm["dump"].as<std::string>(), evaluation_json(e));
      std::cout << fmt::format("per-choice log-likelihoods -> {}\n", vm["dump"].as<std::string>());
    }
    if (store_results) {
      RunStore store = open_result_store(store_path, lm);
      store.write_group("eval/" + task_name(task),
                        evaluation_group(e, {{"data", data_path}, {"checkpoint", lm.path},
                                             {"step", std::to_string(lm.step)}}));
      store.close();
      std::cout << fmt::format("results -> {}:/eval/{}\n", store_path, task_name(task));
    }
    return 0;
  });
}

const Registration reg{{50, "eval", "zero-shot multiple-choice accuracy (hellaswag, piqa, arc_easy, winogrande)", run}};

}  // namespace
}  // namespace prism::cli
