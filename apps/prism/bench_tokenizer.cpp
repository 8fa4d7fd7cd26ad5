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

std::string capture(const std::string& cmd, int& status) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) throw Error("cannot start the reference", cmd, "check --python");
  std::string out;
  char buf[4096];
  for (size_t k; (k = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, k);
  status = pclose(p);
  return out;
}

int run(const std::vector<std::string>& args) {
  return guarded("bench tokenizer", [&] {
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
    po::variables_map vm;
    if (!parse("bench tokenizer", "[options]", o, {}, args, vm)) return 0;
    const double seconds = vm["seconds"].as<double>();
    const int threads = std::max(1, vm["threads"].as<int>());
    const int rounds = std::max(1, vm["rounds"].as<int>());
    const std::string python = vm["python"].as<std::string>(), script = vm["reference"].as<std::string>();
    if (!fs::exists(script))
      throw Error("the tiktoken reference script is missing", script,
                  "run from the repository root, or pass --reference test/reference/tiktoken_gpt2.py");

    std::string label, text_path;
    std::string text;
    fs::path tmp = fs::temp_directory_path() / fmt::format("prism-bench-tokenizer-{}", ::getpid());
    fs::create_directories(tmp);
    struct Cleanup {
      fs::path p;
      ~Cleanup() {
        std::error_code ec;
        fs::remove_all(p, ec);
      }
    } cleanup{tmp};
    if (vm.count("text")) {
      text_path = vm["text"].as<std::string>();
      text = read_all(text_path);
      label = text_path;
    } else {
      text = corpus_text("data/cache/austen/text");
      text_path = (tmp / "austen.txt").string();
      std::ofstream(text_path, std::ios::binary) << text;
      label = "Jane Austen's novels (data/cache/austen/text)";
    }
    Gpt2Tokenizer tok(vm["vocab"].as<std::string>());
    const double mb = text.size() / 1e6;

    std::cout << fmt::format("prism bench tokenizer: GPT-2 BPE encoding (tiktoken's encode_ordinary), best of {} rounds of {:.0f}+ s each\n",
                             rounds, seconds);
    std::cout << fmt::format("machine: {}\n", machine_description());
    std::cout << fmt::format("text: {}, {:.2f} MB\n", label, mb);
    std::cout.flush();

    // Parity on this very text.
    int status = 0;
    std::string ids_path = (tmp / "ids.u32").string();
    std::string out = capture(fmt::format("'{}' '{}' encode '{}' '{}' '{}'", python, script,
                                          vm["vocab"].as<std::string>(), text_path, ids_path),
                              status);
    if (status != 0)
      throw Error("the tiktoken reference failed: " + out.substr(0, 400), script,
                  "check that --python has tiktoken (scripts/setup.sh installs it into .venv)");
    std::string raw = read_all(ids_path);
    std::vector<TokenId> want(raw.size() / 4);
    std::memcpy(want.data(), raw.data(), want.size() * 4);  // little-endian, as this machine
    std::vector<TokenId> ids = tok.encode(text);
    const bool identical = ids == want;

    // Rounds alternate baseline and prism so that a change in machine load hits both; best of each is kept.
    nlohmann::json ref;
    double ref_one = 0, ref_many = 0, one = 1e30, many = 1e30;
    std::vector<TokenId> buf;
    buf.reserve(ids.size() + 16);
    auto docs = documents(text, 64);
    // Threads stay up for all repetitions, so their piece caches stay warm as in data preparation.
    auto parallel = [&](size_t reps) {
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
    };
    for (int round = 0; round < rounds; ++round) {
      std::string cmd = fmt::format("'{}' '{}' bench '{}' '{}' --seconds {} --threads {}", python, script,
                                    vm["vocab"].as<std::string>(), text_path, seconds, threads);
      out = capture(cmd, status);
      try {
        ref = nlohmann::json::parse(out.substr(out.rfind('{')));
      } catch (const std::exception&) {
        throw Error("the tiktoken baseline failed: " + out.substr(0, 400), cmd, "see its output");
      }
      if (status != 0) throw Error("the tiktoken baseline exited with an error: " + out.substr(0, 400), cmd, "see its output");
      ref_one = std::max(ref_one, ref["mbps_1_thread"].get<double>());
      if (ref.contains("mbps_threads")) ref_many = std::max(ref_many, ref["mbps_threads"].get<double>());

      one = std::min(one, best_seconds([&] { buf.clear(); tok.encode(text, buf); }, seconds));
      if (threads > 1) {
        size_t reps = std::max<size_t>(2, static_cast<size_t>(std::ceil(seconds / std::max(parallel(1), 1e-3))));
        many = std::min(many, parallel(reps) / reps);
      }
    }

    std::cout << fmt::format("tokens: {} (prism) vs {} (tiktoken {}); ids identical: {}\n\n", ids.size(), want.size(),
                             ref["tiktoken"].get<std::string>(), identical ? "yes" : "NO");
    std::cout << fmt::format("  {:<38} {:>9} {:>14}\n", "encoder", "MB/s", "vs tiktoken");
    std::cout << fmt::format("  {:<38} {:>9.2f} {:>14}\n", "tiktoken, 1 thread (baseline)", ref_one, "1.00x");
    std::cout << fmt::format("  {:<38} {:>9.2f} {:>13.2f}x\n", "prism, 1 thread", mb / one, mb / one / ref_one);
    if (threads > 1 && ref_many > 0) {
      std::cout << fmt::format("  {:<38} {:>9.2f} {:>14}\n", fmt::format("tiktoken batch, {} threads (baseline)", threads),
                               ref_many, "1.00x");
      std::cout << fmt::format("  {:<38} {:>9.2f} {:>13.2f}x\n", fmt::format("prism, {} threads", threads), mb / many,
                               mb / many / ref_many);
    }
    return identical ? 0 : 1;
  });
}

const BenchRegistration reg{{"tokenizer", "GPT-2 BPE encoding MB/s against tiktoken on the same text", run}};

}  // namespace
}  // namespace prism::cli
