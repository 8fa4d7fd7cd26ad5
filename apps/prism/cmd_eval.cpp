// prism eval CHECKPOINT --task TASK --data FILE: zero-shot multiple-choice accuracy.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>

#include "cli.h"
#include "trained_model_options.h"
#include "prism/data/tokenizer.h"
#include "prism/error.h"
#include "prism/analysis/position_loss_eval.h"
#include "prism/eval/evaluate_checkpoint.h"

namespace prism::cli {
namespace {

const char* kUsage =
    "CHECKPOINT --task hellaswag|piqa|arc_easy|winogrande --data FILE [options]\n"
    "       prism eval CHECKPOINT --position-loss [--context T] [--data DIR] [options]\n\n"
    "Scores each choice by the model's log-likelihood of its continuation and reports acc\n"
    "and acc_norm with lm-evaluation-harness's conventions (acc_norm divides by the answer's\n"
    "UTF-8 bytes; WinoGrande by partial scoring). Results go to the run's run.h5 under\n"
    "/eval/<task> (or --out). Task files are the public ones (docs/analysis.md says where to\n"
    "get them): HellaSwag hellaswag_val.jsonl, PIQA valid.jsonl + valid-labels.lst (--labels),\n"
    "ARC-Easy ARC-Easy-Test.jsonl, WinoGrande dev.jsonl. The model runs on --device with\n"
    "--backend, whatever back end it trained with; requests are scored many per forward pass.\n\n"
    "--position-loss: the validation loss by query position instead, in buckets that double in\n"
    "width ([0,1) [1,2) [2,4) ... up to T), on the run's validation shards (or --data) in windows\n"
    "of --context tokens (default: the context it trained on), stored under /val/by_position/T<T>\n"
    "(training stores the trained context's at its end). A context longer than the trained one\n"
    "measures length extrapolation: RoPE runs any length; learned positions run up to\n"
    "model.block_size (positions past train.seq_len keep their untrained embeddings).\n"
    "scripts/plot/position_loss.py plots it.\n\n"
    "examples:\n"
    "  prism eval runs/prism --task hellaswag --data tasks/hellaswag_val.jsonl\n"
    "  prism eval runs/prism --task piqa --data tasks/valid.jsonl --labels tasks/valid-labels.lst\n"
    "  prism eval runs/prism --task hellaswag --data tasks/hellaswag_val.jsonl --device cuda --backend cuda\n"
    "  prism eval runs/prism --position-loss --context 512";

// Requests (or batches) done, seconds and ETA: in place on a terminal (at most once a second), else every 10 s.
std::function<void(int64_t, int64_t)> progress_line(const std::string& task, const std::string& unit = "requests") {
  const bool tty = ::isatty(STDERR_FILENO);
  const auto start = std::chrono::steady_clock::now();
  auto last = start - std::chrono::hours(1);
  return [=](int64_t done, int64_t total) mutable {
    auto now = std::chrono::steady_clock::now();
    if (done < total && now - last < std::chrono::seconds(tty ? 1 : 10)) return;
    last = now;
    double s = std::chrono::duration<double>(now - start).count();
    std::cerr << (tty ? "\r" : "")
              << fmt::format("eval {}: {}/{} {}, {:.1f} s, ETA {:.0f} s", task, done, total, unit, s,
                             done ? s * static_cast<double>(total - done) / static_cast<double>(done) : 0.0)
              << (tty && done < total ? "" : "\n") << std::flush;
  };
}

// prism eval CHECKPOINT --position-loss: the loss by query position (position_loss_eval.h).
int position_loss(const po::variables_map& vm) {
  for (const char* flag : {"task", "labels", "dump"})
    if (vm.count(flag))
      throw Error(fmt::format("--{} does not go with --position-loss", flag), "prism eval",
                  "measure a task and the loss by position in two commands");
  PositionLossRequest r;
  r.checkpoint = vm["checkpoint"].as<std::string>();
  if (vm.count("data")) r.data = vm["data"].as<std::string>();
  r.context = vm["context"].as<int64_t>();
  r.tokens = vm["tokens"].as<int64_t>();
  r.batch = vm["batch"].as<int64_t>();
  if (vm.count("out")) r.out = vm["out"].as<std::string>();
  r.store = !vm["no-store"].as<bool>();
  r.placement = apply_trained_model_options(vm);
  r.print = [](const std::string& s) { std::cout << s; };
  r.note = [](const std::string& s) { std::cerr << s; };
  r.progress = progress_line("position loss", "batches");
  evaluate_position_loss(r);
  return 0;
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
        ("batch-tokens", po::value<int64_t>()->default_value(0),
         "padded tokens per forward pass (0: 4096 on the CPU, 16384 on a GPU)")
        ("dump", po::value<std::string>(), "write every choice's tokens and log-likelihood to this JSON file")
        ("out", po::value<std::string>(), "write /eval/<task> to this HDF5 file instead of the run's run.h5")
        ("no-store", po::bool_switch(), "print only; write no HDF5")
        ("vocab", po::value<std::string>(), "the tokenizer's ranks file (default: the one the model trained with)")
        ("position-loss", po::bool_switch(), "validation loss by query position instead of a task (see above)")
        ("context", po::value<int64_t>()->default_value(0),
         "--position-loss: window length T (0: the context the run trained on)")
        ("tokens", po::value<int64_t>()->default_value(131072), "--position-loss: validation tokens to read")
        ("batch", po::value<int64_t>()->default_value(0), "--position-loss: sequences per batch (0: max(1, 8192 / T))");
    add_trained_model_options(o);
    po::positional_options_description pos;
    pos.add("checkpoint", 1);
    po::variables_map vm;
    if (!parse("eval", kUsage, o, pos, args, vm)) return 0;
    if (!vm.count("checkpoint")) throw Error("no checkpoint given", "prism eval", "pass a run directory, e.g. prism eval runs/demo ...");
    if (vm["position-loss"].as<bool>()) return position_loss(vm);
    for (const char* flag : {"context", "tokens", "batch"})
      if (!vm[flag].defaulted())
        throw Error(fmt::format("--{} belongs to --position-loss", flag), "prism eval",
                    "add --position-loss, or leave the flag out for a task");
    if (!vm.count("task")) throw Error("no task given", "--task", "pass --task hellaswag|piqa|arc_easy|winogrande");
    if (!vm.count("data")) throw Error("no task file given", "--data", "pass the task's jsonl file (docs/analysis.md)");
    EvalRequest r;
    r.checkpoint = vm["checkpoint"].as<std::string>();
    r.task = vm["task"].as<std::string>();
    r.data = vm["data"].as<std::string>();
    if (vm.count("labels")) r.labels = vm["labels"].as<std::string>();
    r.limit = vm["limit"].as<int64_t>();
    r.on_error = vm["on-error"].as<std::string>();
    r.batch_tokens = vm["batch-tokens"].as<int64_t>();
    if (vm.count("dump")) r.dump = vm["dump"].as<std::string>();
    if (vm.count("out")) r.out = vm["out"].as<std::string>();
    r.store = !vm["no-store"].as<bool>();
    if (vm.count("vocab")) r.vocab = vm["vocab"].as<std::string>();
    r.gpt2_vocab = vocab_path();
    r.placement = apply_trained_model_options(vm);
    r.print = [](const std::string& s) { std::cout << s; };
    r.note = [](const std::string& s) { std::cerr << s; };
    r.progress = progress_line(r.task);
    evaluate_checkpoint(r);
    return 0;
  });
}

const Registration reg{{50, "eval", "zero-shot multiple-choice accuracy (hellaswag, piqa, arc_easy, winogrande)", run}};

}  // namespace
}  // namespace prism::cli
