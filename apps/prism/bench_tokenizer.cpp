// prism bench tokenizer: GPT-2 encoding speed in MB/s against tiktoken (run
// through Python on the same text in the same invocation), with an id-for-id
// check that both produced the same tokens.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "prism/data/tokenizer.h"
#include "prism/error.h"

namespace prism::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read the text", path, "pass an existing UTF-8 file with --text");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Default text: the embedded corpus, chapters in name order.
std::string corpus_text(const std::string& dir) {
  if (!fs::is_directory(dir))
    throw Error("the default benchmark text is missing", dir, "run data/get-corpus.sh, or pass --text FILE");
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".txt") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& f : files) text += read_all(f) + "\n\n";
  return text;
}

// Best time of repeated runs, at least `seconds` in all and at least 2 runs.
template <class F>
double best_seconds(F&& fn, double seconds) {
  double best = 1e30;
  auto start = Clock::now();
  for (int runs = 0; runs < 2 || std::chrono::duration<double>(Clock::now() - start).count() < seconds; ++runs) {
    auto t0 = Clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

// The text cut into about `n` documents at line ends (as data preparation feeds it).
std::vector<std::string_view> documents(const std::string& text, size_t n) {
  std::vector<std::string_view> docs;
  size_t step = std::max<size_t>(1, text.size() / n), from = 0;
  while (from < text.size()) {
    size_t to = std::min(text.size(), from + step);
    while (to < text.size() && text[to - 1] != '\n') ++to;
    docs.emplace_back(text.data() + from, to - from);
    from = to;
  }
  return docs;
}

po::options_description tokenizer_options() {
  po::options_description o("prism bench tokenizer");
  const char* env_py = std::getenv("PRISM_PYTHON");
  o.add_options()
      ("text", po::value<std::string>(), "UTF-8 text to encode (default: the chapters in data/cache/austen/text)")
      ("vocab", po::value<std::string>()->default_value(default_vocab_path()), "gpt2.tiktoken ranks file")
      ("python", po::value<std::string>()->default_value(env_py && *env_py ? env_py : ".venv/bin/python"),
       "Python with tiktoken (the baseline)")
      ("reference", po::value<std::string>()->default_value("test/reference/tiktoken_gpt2.py"), "the tiktoken script")
      ("seconds", po::value<double>()->default_value(2.0), "minimum time per measurement (best run is kept)")
      ("rounds", po::value<int>()->default_value(2), "rounds of baseline-then-prism measurements (best of each is kept)")
      ("threads", po::value<int>()->default_value(static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
       "threads of the second, parallel measurement (1: single thread only)");
  return o;
}

struct Settings {
  double seconds = 0;
  int threads = 1, rounds = 1;
  std::string python, script, vocab;
};

Settings read_settings(const po::variables_map& vm) {
  Settings s;
  s.seconds = vm["seconds"].as<double>();
  s.threads = std::max(1, vm["threads"].as<int>());
  s.rounds = std::max(1, vm["rounds"].as<int>());
  s.python = vm["python"].as<std::string>();
  s.script = vm["reference"].as<std::string>();
  s.vocab = vm["vocab"].as<std::string>();
  if (!fs::exists(s.script))
    throw Error("the tiktoken reference script is missing", s.script,
                "run from the repository root, or pass --reference test/reference/tiktoken_gpt2.py");
  return s;
}

// A scratch directory, removed with everything in it when this goes out of scope.
struct ScratchDir {
  fs::path path = fs::temp_directory_path() / fmt::format("prism-bench-tokenizer-{}", ::getpid());
  ScratchDir() { fs::create_directories(path); }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// The text to encode, and a file holding it for the Python side.
struct BenchText {
  std::string label, path, text;
};

BenchText bench_text(const po::variables_map& vm, const ScratchDir& tmp) {
  BenchText t;
  if (vm.count("text")) {
    t.path = vm["text"].as<std::string>();
    t.text = read_all(t.path);
    t.label = t.path;
    return t;
  }
  t.text = corpus_text("data/cache/austen/text");
  t.path = (tmp.path / "austen.txt").string();
  std::ofstream(t.path, std::ios::binary) << t.text;
  t.label = "Jane Austen's novels (data/cache/austen/text)";
  return t;
}

// Whether `ids` are tiktoken's encoding of the same text, id for id.
bool same_as_tiktoken(const Settings& s, const BenchText& text, const std::vector<TokenId>& ids, const ScratchDir& tmp,
                      size_t& tiktoken_count) {
  int status = 0;
  const std::string ids_path = (tmp.path / "ids.u32").string();
  const std::string out =
      capture(fmt::format("'{}' '{}' encode '{}' '{}' '{}'", s.python, s.script, s.vocab, text.path, ids_path), status);
  if (status != 0)
    throw Error("the tiktoken reference failed: " + out.substr(0, 400), s.script,
                "check that --python has tiktoken (scripts/setup.sh installs it into .venv)");
  const std::string raw = read_all(ids_path);
  std::vector<TokenId> want(raw.size() / 4);
  std::memcpy(want.data(), raw.data(), want.size() * 4);  // little-endian, as this machine
  tiktoken_count = want.size();
  return ids == want;
}

// One tiktoken measurement (its JSON line: mbps_1_thread, mbps_threads, tiktoken).
nlohmann::json tiktoken_round(const Settings& s, const BenchText& text) {
  const std::string cmd = fmt::format("'{}' '{}' bench '{}' '{}' --seconds {} --threads {}", s.python, s.script, s.vocab,
                                      text.path, s.seconds, s.threads);
  int status = 0;
  const std::string out = capture(cmd, status);
  nlohmann::json ref;
  try {
    ref = nlohmann::json::parse(out.substr(out.rfind('{')));
  } catch (const std::exception&) {
    throw Error("the tiktoken baseline failed: " + out.substr(0, 400), cmd, "see its output");
  }
  if (status != 0) throw Error("the tiktoken baseline exited with an error: " + out.substr(0, 400), cmd, "see its output");
  return ref;
}

// Seconds for `threads` threads to encode every document `reps` times. Threads stay
// up for all repetitions, so their piece caches stay warm as in data preparation.
double parallel_encode_seconds(const Gpt2Tokenizer& tok, const std::vector<std::string_view>& docs, int threads,
                               size_t reps) {
  std::atomic<size_t> next{0};
  auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      std::vector<TokenId> local;
      for (size_t d; (d = next++) < reps * docs.size();) {
        local.clear();
        tok.encode(docs[d % docs.size()], local);
      }
    });
  for (auto& t : pool) t.join();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Best MB/s of each encoder: tiktoken's from its script, Prism's as seconds per pass.
struct Speeds {
  double ref_one = 0, ref_many = 0;  // tiktoken, MB/s
  double one = 1e30, many = 1e30;    // Prism, seconds per pass over the text
  std::string tiktoken_version;
};

// Rounds alternate baseline and prism so that a change in machine load hits both; best of each is kept.
Speeds measure(const Settings& s, const BenchText& text, const Gpt2Tokenizer& tok, size_t n_ids) {
  Speeds sp;
  std::vector<TokenId> buf;
  buf.reserve(n_ids + 16);
  const auto docs = documents(text.text, 64);
  for (int round = 0; round < s.rounds; ++round) {
    const nlohmann::json ref = tiktoken_round(s, text);
    sp.tiktoken_version = ref["tiktoken"].get<std::string>();
    sp.ref_one = std::max(sp.ref_one, ref["mbps_1_thread"].get<double>());
    if (ref.contains("mbps_threads")) sp.ref_many = std::max(sp.ref_many, ref["mbps_threads"].get<double>());
    sp.one = std::min(sp.one, best_seconds([&] { buf.clear(); tok.encode(text.text, buf); }, s.seconds));
    if (s.threads > 1) {
      const double once = std::max(parallel_encode_seconds(tok, docs, s.threads, 1), 1e-3);
      const size_t reps = std::max<size_t>(2, static_cast<size_t>(std::ceil(s.seconds / once)));
      sp.many = std::min(sp.many, parallel_encode_seconds(tok, docs, s.threads, reps) / reps);
    }
  }
  return sp;
}

void print_speeds(const Settings& s, const Speeds& sp, double mb) {
  std::cout << fmt::format("  {:<38} {:>9} {:>14}\n", "encoder", "MB/s", "vs tiktoken");
  std::cout << fmt::format("  {:<38} {:>9.2f} {:>14}\n", "tiktoken, 1 thread (baseline)", sp.ref_one, "1.00x");
  std::cout << fmt::format("  {:<38} {:>9.2f} {:>13.2f}x\n", "prism, 1 thread", mb / sp.one, mb / sp.one / sp.ref_one);
  if (s.threads > 1 && sp.ref_many > 0) {
    std::cout << fmt::format("  {:<38} {:>9.2f} {:>14}\n", fmt::format("tiktoken batch, {} threads (baseline)", s.threads),
                             sp.ref_many, "1.00x");
    std::cout << fmt::format("  {:<38} {:>9.2f} {:>13.2f}x\n", fmt::format("prism, {} threads", s.threads), mb / sp.many,
                             mb / sp.many / sp.ref_many);
  }
}

int run(const std::vector<std::string>& args) {
  return guarded("bench tokenizer", [&] {
    po::variables_map vm;
    if (!parse("bench tokenizer", "[options]", tokenizer_options(), {}, args, vm)) return 0;
    const Settings s = read_settings(vm);
    const ScratchDir tmp;
    const BenchText text = bench_text(vm, tmp);
    Gpt2Tokenizer tok(s.vocab);
    const double mb = text.text.size() / 1e6;
    std::cout << fmt::format("prism bench tokenizer: GPT-2 BPE encoding (tiktoken's encode_ordinary), best of {} rounds of {:.0f}+ s each\n",
                             s.rounds, s.seconds);
    std::cout << fmt::format("machine: {}\n", machine_description());
    std::cout << fmt::format("text: {}, {:.2f} MB\n", text.label, mb);
    std::cout.flush();
    const std::vector<TokenId> ids = tok.encode(text.text);
    size_t tiktoken_count = 0;
    const bool identical = same_as_tiktoken(s, text, ids, tmp, tiktoken_count);  // parity on this very text
    const Speeds sp = measure(s, text, tok, ids.size());
    std::cout << fmt::format("tokens: {} (prism) vs {} (tiktoken {}); ids identical: {}\n\n", ids.size(), tiktoken_count,
                             sp.tiktoken_version, identical ? "yes" : "NO");
    print_speeds(s, sp, mb);
    return identical ? 0 : 1;
  });
}

const BenchRegistration reg{{"tokenizer", "GPT-2 BPE encoding MB/s against tiktoken on the same text", run}};

}  // namespace
}  // namespace prism::cli
