// prism bench prepare: the data step's throughput per core against llm.c's
// pipeline (dev/data/fineweb.py's logic: tiktoken in a multiprocessing Pool, as
// re-implemented on local files by test/reference/llmc_fineweb.py), on the same
// documents, the same number of workers, side by side in one invocation, with a
// byte-for-byte check that both wrote the same shards.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "prism/data/input_files.h"
#include "prism/data/prepare.h"
#include "prism/data/tokenizer.h"
#include "prism/error.h"

namespace prism::cli {
namespace {

namespace fs = std::filesystem;

nlohmann::json last_json_line(const std::string& out, const std::string& cmd, int status) {
  const size_t at = out.rfind('{');
  if (status != 0 || at == std::string::npos)
    throw Error("the llm.c reference failed: " + out.substr(0, 600), cmd,
                "check that --python has tiktoken, numpy and pyarrow (scripts/setup.sh installs them into .venv)");
  return nlohmann::json::parse(out.substr(at));
}

std::map<std::string, std::string> shards_in(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".bin") {
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      out[e.path().filename().string()] = ss.str();
    }
  return out;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

int run(const std::vector<std::string>& args) {
  return guarded("bench prepare", [&] {
    po::options_description o("prism bench prepare");
    const char* env_py = std::getenv("PRISM_PYTHON");
    o.add_options()
        ("input", po::value<std::vector<std::string>>()->composing(),
         "Parquet or JSONL files or directories (also positional; default: every paragraph of the Austen corpus as Parquet)")
        ("threads,j", po::value<int>()->default_value(static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
         "workers on each side: prism's tokenising threads, the Pool's processes")
        ("shard-tokens", po::value<int64_t>()->default_value(100000), "tokens per shard (validation too, as llm.c)")
        ("text-key", po::value<std::string>()->default_value("text"), "JSONL: the text's key")
        ("text-column", po::value<std::string>()->default_value("text"), "Parquet: the text's column")
        ("rounds", po::value<int>()->default_value(2), "rounds of llm.c-then-prism runs (the best of each is kept)")
        ("vocab", po::value<std::string>()->default_value(default_vocab_path()), "gpt2.tiktoken ranks file")
        ("python", po::value<std::string>()->default_value(env_py && *env_py ? env_py : ".venv/bin/python"),
         "Python with tiktoken, numpy and pyarrow (the baseline)")
        ("reference", po::value<std::string>()->default_value("test/reference/llmc_fineweb.py"), "the llm.c pipeline script");
    po::positional_options_description pos;
    pos.add("input", -1);
    po::variables_map vm;
    if (!parse("bench prepare", "[INPUT...] [options]", o, pos, args, vm)) return 0;
    const int threads = std::max(1, vm["threads"].as<int>());
    const int rounds = std::max(1, vm["rounds"].as<int>());
    const int64_t shard = vm["shard-tokens"].as<int64_t>();
    const std::string python = vm["python"].as<std::string>(), script = vm["reference"].as<std::string>();
    const std::string vocab = vm["vocab"].as<std::string>();
    if (!fs::exists(script))
      throw Error("the llm.c reference script is missing", script,
                  "run from the repository root, or pass --reference test/reference/llmc_fineweb.py");

    const fs::path tmp = fs::temp_directory_path() / fmt::format("prism-bench-prepare-{}", ::getpid());
    fs::create_directories(tmp);
    struct Cleanup {
      fs::path p;
      ~Cleanup() {
        std::error_code ec;
        fs::remove_all(p, ec);
      }
    } cleanup{tmp};

    std::vector<std::string> inputs;
    std::string label;
    int status = 0;
    if (vm.count("input")) {
      inputs = vm["input"].as<std::vector<std::string>>();
      label = inputs.size() == 1 ? inputs[0] : fmt::format("{} inputs", inputs.size());
    } else {
      // Distinct text (a repeated one would flatter prism's piece cache, which tiktoken lacks).
      const std::string cmd = fmt::format("{} {} fixture {} --text-dir data/cache/austen/text --all-paragraphs",
                                          quoted(python), quoted(script), quoted((tmp / "fixture").string()));
      last_json_line(capture(cmd, status), cmd, status);
      inputs = {(tmp / "fixture" / "parquet").string()};
      label = "every paragraph of the Austen corpus and the fixture's edge cases, as Parquet in FineWeb's columns";
    }
    std::string files;
    uint64_t input_bytes = 0;
    for (const auto& f : input_files(inputs, "auto")) {
      if (f.format == InputFormat::text)
        throw Error("llm.c's pipeline reads Parquet or JSONL here, not text", f.path, "give *.parquet or *.jsonl files");
      files += " " + quoted(f.path);
      input_bytes += f.bytes;
    }

    std::cout << fmt::format("prism bench prepare: the data step (read, tokenise, write llm.c shards), prism against "
                             "llm.c's fineweb.py pipeline; {} worker{} each, best of {} rounds\n",
                             threads, threads == 1 ? "" : "s", rounds);
    std::cout << fmt::format("machine: {}\n", machine_description());
    std::cout << fmt::format("input: {} ({:.1f} MB on disk)\n", label, input_bytes / 1e6);
    std::cout.flush();

    double llmc_best = 1e30, prism_best = 1e30;
    nlohmann::json ref;
    PrepareSummary mine;
    bool identical = true;
    for (int round = 0; round < rounds; ++round) {
      const std::string ref_dir = (tmp / fmt::format("llmc-{}", round)).string();
      const std::string cmd = fmt::format("{} {} shards {} {} --shard-size {} --procs {} --text-key {} --text-column {}{}",
                                          quoted(python), quoted(script), quoted(vocab), quoted(ref_dir), shard, threads,
                                          quoted(vm["text-key"].as<std::string>()),
                                          quoted(vm["text-column"].as<std::string>()), files);
      ref = last_json_line(capture(cmd, status), cmd, status);
      llmc_best = std::min(llmc_best, ref["seconds"].get<double>());

      PrepareOptions p;
      p.inputs = inputs;
      p.output = (tmp / fmt::format("prism-{}", round)).string();
      p.name = "fineweb";
      p.vocab = vocab;
      p.val_tokens = p.shard_tokens = shard;
      p.threads = threads;
      p.text_key = vm["text-key"].as<std::string>();
      p.text_column = vm["text-column"].as<std::string>();
      mine = prepare_corpus(p);
      prism_best = std::min(prism_best, mine.seconds);
      identical = identical && shards_in(ref_dir) == shards_in(p.output);
      fs::remove_all(ref_dir);
      fs::remove_all(p.output);
    }

    const double tokens = static_cast<double>(mine.tokens), mb = mine.bytes / 1e6;
    std::cout << fmt::format("documents: {}, text {:.1f} MB, {} tokens in {} shards; shards byte for byte identical: {}\n\n",
                             mine.documents, mb, mine.tokens, mine.shards.size(), identical ? "yes" : "NO");
    std::cout << fmt::format("  {:<44} {:>8} {:>14} {:>16} {:>12}\n", "pipeline", "seconds", "M tokens/s/core",
                             "MB/s/core (text)", "vs llm.c");
    auto row = [&](const std::string& name, double s) {
      std::cout << fmt::format("  {:<44} {:>8.2f} {:>14.3f} {:>16.2f} {:>11.2f}x\n", name, s, tokens / s / threads / 1e6,
                               mb / s / threads, llmc_best / s);
    };
    row(fmt::format("llm.c fineweb.py logic, Pool({}) (baseline)", threads), llmc_best);
    row(fmt::format("prism data prepare, {} thread{}", threads, threads == 1 ? "" : "s"), prism_best);
    std::cout << fmt::format("\nper core: prism {:.2f}x llm.c's pipeline (target: 2x). Both read the same files and write "
                             "the same shards; times cover reading, tokenising and writing.\n",
                             llmc_best / prism_best);
    return identical ? 0 : 1;
  });
}

const BenchRegistration reg{{"prepare", "the data step per core against llm.c's fineweb.py pipeline on the same documents", run}};

}  // namespace
}  // namespace prism::cli
