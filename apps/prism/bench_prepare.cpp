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
#include <optional>
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

// The command line, read: the workers, rounds and shard size, and the two pipelines' settings.
struct BenchArgs {
  std::optional<std::vector<std::string>> inputs;  // none given: the Austen fixture
  int threads = 1, rounds = 1;
  int64_t shard = 0;
  std::string python, script, vocab, text_key, text_column;
};

// Declares the options of `prism bench prepare`.
void add_options(po::options_description& o) {
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
}

// Parses the command line (nothing after --help) and checks that the reference script is there.
std::optional<BenchArgs> parse_args(const std::vector<std::string>& args) {
  po::options_description o("prism bench prepare");
  add_options(o);
  po::positional_options_description pos;
  pos.add("input", -1);
  po::variables_map vm;
  if (!parse("bench prepare", "[INPUT...] [options]", o, pos, args, vm)) return std::nullopt;
  BenchArgs b;
  if (vm.count("input")) b.inputs = vm["input"].as<std::vector<std::string>>();
  b.threads = std::max(1, vm["threads"].as<int>());
  b.rounds = std::max(1, vm["rounds"].as<int>());
  b.shard = vm["shard-tokens"].as<int64_t>();
  b.python = vm["python"].as<std::string>();
  b.script = vm["reference"].as<std::string>();
  b.vocab = vm["vocab"].as<std::string>();
  b.text_key = vm["text-key"].as<std::string>();
  b.text_column = vm["text-column"].as<std::string>();
  if (!fs::exists(b.script))
    throw Error("the llm.c reference script is missing", b.script,
                "run from the repository root, or pass --reference test/reference/llmc_fineweb.py");
  return b;
}

// The input files both pipelines read, as prism's inputs and as the reference's arguments.
struct Inputs {
  std::vector<std::string> paths;
  std::string label;   // what the header calls them
  std::string files;   // " 'a' 'b' ...": the files, quoted for the reference's command line
  uint64_t bytes = 0;  // on disk
};

// The inputs given, or the Austen fixture written under `tmp`; each file Parquet or JSONL.
Inputs gather_inputs(const BenchArgs& b, const fs::path& tmp) {
  Inputs in;
  if (b.inputs) {
    in.paths = *b.inputs;
    in.label = in.paths.size() == 1 ? in.paths[0] : fmt::format("{} inputs", in.paths.size());
  } else {
    // Distinct text (a repeated one would flatter prism's piece cache, which tiktoken lacks).
    int status = 0;
    const std::string cmd = fmt::format("{} {} fixture {} --text-dir data/cache/austen/text --all-paragraphs",
                                        quoted(b.python), quoted(b.script), quoted((tmp / "fixture").string()));
    last_json_line(capture(cmd, status), cmd, status);
    in.paths = {(tmp / "fixture" / "parquet").string()};
    in.label = "every paragraph of the Austen corpus and the fixture's edge cases, as Parquet in FineWeb's columns";
  }
  for (const auto& f : input_files(in.paths, "auto")) {
    if (f.format == InputFormat::text)
      throw Error("llm.c's pipeline reads Parquet or JSONL here, not text", f.path, "give *.parquet or *.jsonl files");
    in.files += " " + quoted(f.path);
    in.bytes += f.bytes;
  }
  return in;
}

// The best times of each pipeline over the rounds, the last round's summary, and whether all shards matched.
struct Measured {
  double llmc_best = 1e30, prism_best = 1e30;
  PrepareSummary mine;
  bool identical = true;
};

// Runs llm.c's pipeline, then prism's, `rounds` times on the same files, comparing their shards.
Measured measure(const BenchArgs& b, const Inputs& in, const fs::path& tmp) {
  Measured m;
  int status = 0;
  for (int round = 0; round < b.rounds; ++round) {
    const std::string ref_dir = (tmp / fmt::format("llmc-{}", round)).string();
    const std::string cmd = fmt::format("{} {} shards {} {} --shard-size {} --procs {} --text-key {} --text-column {}{}",
                                        quoted(b.python), quoted(b.script), quoted(b.vocab), quoted(ref_dir), b.shard,
                                        b.threads, quoted(b.text_key), quoted(b.text_column), in.files);
    const nlohmann::json ref = last_json_line(capture(cmd, status), cmd, status);
    m.llmc_best = std::min(m.llmc_best, ref["seconds"].get<double>());

    PrepareOptions p;
    p.inputs = in.paths;
    p.output = (tmp / fmt::format("prism-{}", round)).string();
    p.name = "fineweb";
    p.vocab = b.vocab;
    p.val_tokens = p.shard_tokens = b.shard;
    p.threads = b.threads;
    p.text_key = b.text_key;
    p.text_column = b.text_column;
    m.mine = prepare_corpus(p);
    m.prism_best = std::min(m.prism_best, m.mine.seconds);
    m.identical = m.identical && shards_in(ref_dir) == shards_in(p.output);
    fs::remove_all(ref_dir);
    fs::remove_all(p.output);
  }
  return m;
}

// Prints what is compared: the pipelines, the workers and rounds, the machine and the input.
void print_header(const BenchArgs& b, const Inputs& in) {
  std::cout << fmt::format("prism bench prepare: the data step (read, tokenise, write llm.c shards), prism against "
                           "llm.c's fineweb.py pipeline; {} worker{} each, best of {} rounds\n",
                           b.threads, b.threads == 1 ? "" : "s", b.rounds);
  std::cout << fmt::format("machine: {}\n", machine_description());
  std::cout << fmt::format("input: {} ({:.1f} MB on disk)\n", in.label, in.bytes / 1e6);
  std::cout.flush();
}

// Prints the corpus, a row per pipeline (time, rates per core, ratio to llm.c) and the per-core ratio.
void print_table(int threads, const Measured& m) {
  const double tokens = static_cast<double>(m.mine.tokens), mb = m.mine.bytes / 1e6;
  std::cout << fmt::format("documents: {}, text {:.1f} MB, {} tokens in {} shards; shards byte for byte identical: {}\n\n",
                           m.mine.documents, mb, m.mine.tokens, m.mine.shards.size(), m.identical ? "yes" : "NO");
  std::cout << fmt::format("  {:<44} {:>8} {:>14} {:>16} {:>12}\n", "pipeline", "seconds", "M tokens/s/core",
                           "MB/s/core (text)", "vs llm.c");
  auto row = [&](const std::string& name, double s) {
    std::cout << fmt::format("  {:<44} {:>8.2f} {:>14.3f} {:>16.2f} {:>11.2f}x\n", name, s, tokens / s / threads / 1e6,
                             mb / s / threads, m.llmc_best / s);
  };
  row(fmt::format("llm.c fineweb.py logic, Pool({}) (baseline)", threads), m.llmc_best);
  row(fmt::format("prism data prepare, {} thread{}", threads, threads == 1 ? "" : "s"), m.prism_best);
  std::cout << fmt::format("\nper core: prism {:.2f}x llm.c's pipeline (target: 2x). Both read the same files and write "
                           "the same shards; times cover reading, tokenising and writing.\n",
                           m.llmc_best / m.prism_best);
}

int run(const std::vector<std::string>& args) {
  return guarded("bench prepare", [&] {
    const std::optional<BenchArgs> b = parse_args(args);
    if (!b) return 0;
    const fs::path tmp = fs::temp_directory_path() / fmt::format("prism-bench-prepare-{}", ::getpid());
    fs::create_directories(tmp);
    struct Cleanup {
      fs::path p;
      ~Cleanup() {
        std::error_code ec;
        fs::remove_all(p, ec);
      }
    } cleanup{tmp};

    const Inputs in = gather_inputs(*b, tmp);
    print_header(*b, in);
    const Measured m = measure(*b, in, tmp);
    print_table(b->threads, m);
    return m.identical ? 0 : 1;
  });
}

const BenchRegistration reg{{"prepare", "the data step per core against llm.c's fineweb.py pipeline on the same documents", run}};

}  // namespace
}  // namespace prism::cli
