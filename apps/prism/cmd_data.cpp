// prism data prepare: text, JSONL or Parquet corpora (or a recipe) -> llm.c-format token shards.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include <unistd.h>

#include "cli.h"
#include "prism/data/bpe_trainer.h"
#include "prism/data/prepare.h"
#include "prism/data/tokenizer.h"
#include "prism/error.h"

namespace prism::cli {
namespace {

const char* kUsage =
    "[INPUT...] [options]\n\n"
    "Tokenises a corpus into llm.c-format shards: EOT before each document, shard 0\n"
    "(<name>_val_000000.bin) for validation, then training shards\n"
    "(<name>_train_000001.bin, ...). INPUT: files, or directories (every input file\n"
    "below them, sorted by path). Formats, by file name (or --format):\n"
    "  *.parquet                 the text in a string column (--text-column, default text):\n"
    "                            FineWeb and FineWeb-Edu as Hugging Face ships them\n"
    "  *.jsonl, *.ndjson         one JSON object per line, the text under --text-key\n"
    "                            (default text); gzip or zstd compressed too (.gz, .zst)\n"
    "  *.txt (and other files)   UTF-8 text, documents by --split\n"
    "The inputs are streamed (a few hundred MB of memory for any corpus size) and\n"
    "tokenised on all cores. Stopped at any moment (kill -9, a full disk, bad input),\n"
    "the same command continues from the last complete shard (kept beside the output,\n"
    "in .<output name>.prepare/), and the shards come out\n"
    "byte for byte as from an uninterrupted run. Bad input (a damaged file, a line\n"
    "that is not JSON, a missing key or column, text that is not UTF-8) stops with an\n"
    "error naming the file and line or row; --skip-bad skips it and lists it in\n"
    "prepare.json. With --val-tokens 100000000 (= --shard-tokens) the shards are byte\n"
    "for byte those of llm.c's dev/data/fineweb.py on the same documents.\n"
    "The vocabulary is GPT-2's, a tiktoken ranks file (--vocab), or a compact\n"
    "byte-level BPE trained here on the training documents only (--train-vocab N);\n"
    "it is copied to OUTPUT/vocab.tiktoken. prepare.json (written last) records it\n"
    "and the unigram baseline: the validation loss of a model that ignores context.\n"
    "A recipe (data/recipes/<name>.yaml) names inputs and settings; flags given with\n"
    "it override the recipe's. docs/data.md has the details.\n\n"
    "examples:\n"
    "  prism data prepare --recipe austen               (after data/get-corpus.sh)\n"
    "  prism data prepare --recipe austen-bpe           (a 4096-id vocabulary trained on the corpus)\n"
    "  prism data prepare --recipe fineweb10B /data/fineweb/sample/10BT   (llm.c's FineWeb shards)\n"
    "  prism data prepare corpus.jsonl.zst -o data/cache/mine --text-key content --max-tokens 2000000000\n"
    "  prism data prepare books/ -o data/cache/books --split blank-line --val-tokens 50000";

std::string with_commas(uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::string duration(double s) {
  if (s < 60) return fmt::format("{:.1f} s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", int(s) / 60, int(s) % 60);
  return fmt::format("{}h{:02d}m", int(s) / 3600, int(s) % 3600 / 60);
}

std::string si(double v, const char* unit) {
  if (v >= 1e9) return fmt::format("{:.2f}G{}", v / 1e9, unit);
  if (v >= 1e6) return fmt::format("{:.1f}M{}", v / 1e6, unit);
  if (v >= 1e3) return fmt::format("{:.1f}k{}", v / 1e3, unit);
  return fmt::format("{:.0f}{}", v, unit);
}

// One line, redrawn in place on a terminal, every few seconds otherwise: input read, text and
// token rates of this run, shards, and the ETA (by input bytes, or by tokens under --max-tokens).
std::function<void(const PrepareProgress&)> progress_printer() {
  const bool tty = ::isatty(STDERR_FILENO);
  auto last = std::make_shared<double>(-1e9);
  return [tty, last](const PrepareProgress& p) {
    if (!p.done && p.seconds - *last < (tty ? 0.5 : 5)) return;
    *last = p.seconds;
    const double secs = std::max(p.seconds, 1e-9);
    const double in_rate = (p.bytes_done - std::min(p.bytes_done, p.resumed_bytes)) / secs;
    const double text_rate = (p.text_bytes - std::min(p.text_bytes, p.resumed_text_bytes)) / secs;
    const double token_rate = (p.tokens - std::min(p.tokens, p.resumed_tokens)) / secs;
    double eta = in_rate > 0 ? (p.bytes_total - std::min(p.bytes_total, p.bytes_done)) / in_rate : 0;
    if (p.max_tokens > 0 && token_rate > 0) eta = std::min(eta, (p.max_tokens - std::min(p.max_tokens, p.tokens)) / token_rate);
    const double share = p.max_tokens > 0 ? std::max(double(p.bytes_done) / std::max<uint64_t>(p.bytes_total, 1),
                                                      double(p.tokens) / p.max_tokens)
                                          : double(p.bytes_done) / std::max<uint64_t>(p.bytes_total, 1);
    std::string line = fmt::format(
        "prepare: {:.1f} of {:.1f} MB read ({:.0f}%), {:.1f} MB/s of text, {}/s, {} documents, {} tokens, {} shards{}, ETA {}",
        p.bytes_done / 1e6, p.bytes_total / 1e6, 100.0 * std::min(share, 1.0), text_rate / 1e6, si(token_rate, " tokens"),
        with_commas(p.documents), with_commas(p.tokens), p.shards,
        p.skipped ? fmt::format(", {} skipped", with_commas(p.skipped)) : "", p.done ? "0 s" : duration(eta));
    if (tty)
      std::cerr << "\r" << line << "\x1b[K" << (p.done ? "\n" : "") << std::flush;
    else
      std::cerr << line << "\n";
  };
}

// Declares the options of `prism data prepare`.
void add_prepare_options(po::options_description& o) {
  o.add_options()
      ("input", po::value<std::vector<std::string>>()->composing(), "input files or directories (also positional)")
      ("recipe,r", po::value<std::string>(), "a recipe name (data/recipes/<name>.yaml) or a recipe file")
      ("output,o", po::value<std::string>(), "directory for the shards")
      ("format", po::value<std::string>(), "auto (by file name, default), text, jsonl or parquet")
      ("text-key", po::value<std::string>(), "JSONL: the key that holds the text (default text)")
      ("text-column", po::value<std::string>(), "Parquet: the column that holds the text (default text)")
      ("max-tokens", po::value<uint64_t>(), "stop after this many tokens, validation included (a prefix, e.g. 10B of a larger set)")
      ("skip-bad", po::bool_switch(), "skip bad records (and files that cannot be read on), listed in prepare.json")
      ("name", po::value<std::string>(), "shard file prefix (default: the output directory's name)")
      ("split", po::value<std::string>(), "documents: file (one per file, default), blank-line (paragraphs), marker")
      ("marker", po::value<std::string>(), "for --split marker: the line that separates documents")
      ("val-tokens", po::value<int64_t>(), "tokens in the validation shard (default 100000)")
      ("shard-tokens", po::value<int64_t>(), "tokens per training shard (default 100000000)")
      ("shuffle-seed", po::value<uint64_t>(), "shuffle the document order with this seed (default: input order)")
      ("threads,j", po::value<int>()->default_value(0), "tokenising threads (0: all cores)")
      ("vocab", po::value<std::string>(), "a tiktoken ranks file (default: GPT-2's, data/get-vocab.sh puts it in data/cache)")
      ("train-vocab", po::value<int>(), "train a compact vocabulary of N ids on the training documents instead (2048-8192)")
      ("force", po::bool_switch(), "replace shards already prepared in the output directory")
      ("if-missing", po::bool_switch(), "do nothing if the output directory already holds a finished preparation")
      ("quiet,q", po::bool_switch(), "no progress line");
}

// The preparation asked for: the recipe's settings (if any), overridden by the flags given.
PrepareOptions prepare_options(const po::variables_map& vm) {
  PrepareOptions opt;
  if (vm.count("recipe")) opt = load_recipe(vm["recipe"].as<std::string>());
  if (vm.count("input")) opt.inputs = vm["input"].as<std::vector<std::string>>();
  if (vm.count("output")) opt.output = vm["output"].as<std::string>();
  if (vm.count("name")) opt.name = vm["name"].as<std::string>();
  if (vm.count("format")) opt.format = vm["format"].as<std::string>();
  if (vm.count("text-key")) opt.text_key = vm["text-key"].as<std::string>();
  if (vm.count("text-column")) opt.text_column = vm["text-column"].as<std::string>();
  if (vm.count("max-tokens")) opt.max_tokens = vm["max-tokens"].as<uint64_t>();
  if (vm["skip-bad"].as<bool>()) opt.skip_bad = true;
  if (vm.count("split")) opt.split = vm["split"].as<std::string>();
  if (vm.count("marker")) opt.marker = vm["marker"].as<std::string>();
  if (vm.count("val-tokens")) opt.val_tokens = vm["val-tokens"].as<int64_t>();
  if (vm.count("shard-tokens")) opt.shard_tokens = vm["shard-tokens"].as<int64_t>();
  if (vm.count("shuffle-seed")) opt.shuffle_seed = vm["shuffle-seed"].as<uint64_t>();
  opt.threads = vm["threads"].as<int>();
  if (vm.count("vocab")) {
    opt.vocab = vm["vocab"].as<std::string>();
    opt.train_vocab = 0;
  }
  if (vm.count("train-vocab")) {
    opt.train_vocab = vm["train-vocab"].as<int>();
    opt.vocab.clear();
  }
  opt.force = vm["force"].as<bool>();
  if (opt.inputs.empty())
    throw Error("no input given", "command line", "give input files or directories, or --recipe NAME");
  if (opt.output.empty()) throw Error("no output directory given", "command line", "pass --output DIR");
  return opt;
}

// Prints what a preparation wrote: documents, tokens, shards, vocabulary, unigram baseline and rate.
void print_prepared(const PrepareSummary& s, int threads) {
  std::cout << fmt::format("prepared {}: {} documents from {} files ({:.2f} MB) -> {} tokens\n", s.output,
                           with_commas(s.documents), with_commas(s.files), s.bytes / 1e6, with_commas(s.tokens));
  std::cout << fmt::format("  val   {:>12} tokens  {}\n", with_commas(s.val_tokens), s.shards.front());
  std::cout << fmt::format("  train {:>12} tokens  {} shard{} ({} ...)\n", with_commas(s.train_tokens),
                           s.shards.size() - 1, s.shards.size() == 2 ? "" : "s", s.shards[1]);
  std::cout << fmt::format("  vocab {} ids{}, {:.2f} bytes per token: {}\n", s.vocab_size,
                           s.vocab_trained ? " (trained on the training documents)" : "",
                           static_cast<double>(s.bytes) / static_cast<double>(std::max<uint64_t>(s.tokens, 1)), s.vocab);
  if (s.skipped > 0)
    std::cout << fmt::format("  skipped {} bad records (--skip-bad; listed in {}/prepare.json)\n", with_commas(s.skipped), s.output);
  if (s.resumed_shards > 0)
    std::cout << fmt::format("  resumed: {} shard{} came from the stopped run\n", s.resumed_shards,
                             s.resumed_shards == 1 ? "" : "s");
  std::cout << fmt::format("  unigram baseline: {:.4f} nats per validation token (a model must beat this to use context)\n",
                           s.unigram_val_loss);
  std::cout << fmt::format("  {} on {} thread{} ({:.1f} MB/s of text, {}/s{})\n", duration(s.seconds), threads,
                           threads == 1 ? "" : "s", s.bytes / 1e6 / std::max(s.seconds, 1e-9),
                           si(s.tokens / std::max(s.seconds, 1e-9), " tokens"),
                           s.resumed_shards ? ", counting the resumed shards' work" : "");
}

int prepare(const std::vector<std::string>& args) {
  po::options_description o("prism data prepare");
  add_prepare_options(o);
  po::positional_options_description pos;
  pos.add("input", -1);
  po::variables_map vm;
  if (!parse("data prepare", kUsage, o, pos, args, vm)) return 0;

  PrepareOptions opt = prepare_options(vm);
  if (vm["if-missing"].as<bool>() && !opt.force) {
    if (auto done = read_prepared(opt.output)) {
      std::cout << fmt::format("{} already prepared: {} tokens in {} shards (--force to redo)\n", opt.output,
                               with_commas(done->tokens), done->shards.size());
      return 0;
    }
  }
  if (!vm["quiet"].as<bool>()) opt.progress = progress_printer();
  opt.notice = [](const std::string& line) { std::cerr << "prepare: " << line << "\n"; };
  const int threads = opt.threads > 0 ? opt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  print_prepared(prepare_corpus(opt), threads);
  return 0;
}

const char* kVocabUsage =
    "[INPUT...] --size N --output FILE [options]\n\n"
    "Trains a compact byte-level BPE vocabulary on UTF-8 text, with GPT-2's\n"
    "pre-tokenisation, and writes it in tiktoken's ranks format (base64 token, space,\n"
    "rank): ranks 0-255 are the single bytes, each further rank merges the most\n"
    "frequent adjacent pair; end-of-text takes id N-1, so the vocabulary has N ids.\n"
    "tiktoken loads the file (Encoding(pat_str=GPT-2's, mergeable_ranks=...,\n"
    "special_tokens={'<|endoftext|>': N-1})) and encodes as prism does; `prism data\n"
    "prepare --vocab FILE` tokenises with it. A recipe with `vocab_size: N` trains\n"
    "one itself, on its training documents only.\n"
    "INPUT: text files, or directories (every *.txt below them).\n\n"
    "examples:\n"
    "  prism data vocab --recipe austen --size 4096 -o data/cache/austen-4096.tiktoken\n"
    "  prism data vocab books/ --size 8192 -o books.tiktoken";

int vocab(const std::vector<std::string>& args) {
  po::options_description o("prism data vocab");
  o.add_options()
      ("input", po::value<std::vector<std::string>>()->composing(), "text files or directories (also positional)")
      ("recipe,r", po::value<std::string>(), "take the inputs of a recipe (data/recipes/<name>.yaml)")
      ("size,n", po::value<int>(), "ids in the vocabulary, end-of-text included (258..65536; e.g. 2048-8192)")
      ("output,o", po::value<std::string>(), "the tiktoken ranks file to write")
      ("force", po::bool_switch(), "replace an existing output file")
      ("quiet,q", po::bool_switch(), "no progress line");
  po::positional_options_description pos;
  pos.add("input", -1);
  po::variables_map vm;
  if (!parse("data vocab", kVocabUsage, o, pos, args, vm)) return 0;
  std::vector<std::string> inputs;
  std::string hint;
  if (vm.count("recipe")) {
    const PrepareOptions r = load_recipe(vm["recipe"].as<std::string>());
    inputs = r.inputs;
    hint = r.fetch_hint;
  }
  if (vm.count("input")) inputs = vm["input"].as<std::vector<std::string>>();
  if (inputs.empty()) throw Error("no input given", "command line", "give text files or directories, or --recipe NAME");
  if (!vm.count("size")) throw Error("no vocabulary size given", "command line", "pass --size N (e.g. 4096)");
  if (!vm.count("output")) throw Error("no output file given", "command line", "pass --output FILE.tiktoken");
  const std::string out = vm["output"].as<std::string>();
  if (std::filesystem::exists(out) && !vm["force"].as<bool>())
    throw Error("the output file exists", out, "pass --force to replace it, or choose another --output");

  const auto t0 = std::chrono::steady_clock::now();
  auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  PieceCounts counts;
  for (const auto& f : text_files(inputs, hint)) {
    std::ifstream in(f, std::ios::binary);
    if (!in) throw Error("cannot read the file", f, "check the file and its permissions");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
      counts.add_text(text);
    } catch (const Error& e) {
      throw Error(e.what_part(), f, e.fix());
    }
  }
  const double counted = since();
  BpeTrainOptions bo;
  bo.vocab_size = vm["size"].as<int>();
  const bool tty = ::isatty(STDERR_FILENO);
  if (!vm["quiet"].as<bool>())
    bo.progress = [&](int done, int total) {
      std::cerr << (tty ? "\r" : "") << fmt::format("vocab: {} of {} ranks, {:.1f} s", done, total, since())
                << (tty ? "\x1b[K" : "\n") << std::flush;
    };
  const BpeVocabulary v = train_bpe(counts, bo);
  if (!vm["quiet"].as<bool>() && tty) std::cerr << "\n";
  write_tiktoken_ranks(out, v);
  std::cout << fmt::format("wrote {}: {} ids ({} ranks + end-of-text at id {}) from {:.2f} MB of text ({} pieces, {} "
                           "distinct) in {:.1f} s ({:.1f} s counting)\n",
                           out, v.vocab_size(), v.tokens.size(), v.tokens.size(), counts.bytes() / 1e6,
                           with_commas(counts.pieces()), with_commas(counts.counts().size()), since(), counted);
  return 0;
}

int run(const std::vector<std::string>& args) {
  return guarded("data", [&] {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
      std::cout << "usage: prism data prepare " << kUsage << "\n\n       prism data vocab " << kVocabUsage
                << "\n\n`prism data prepare --help` and `prism data vocab --help` list the options.\n";
      return args.empty() ? 2 : 0;
    }
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    if (args[0] == "prepare") return prepare(rest);
    if (args[0] == "vocab") return vocab(rest);
    throw Error("unknown data command '" + args[0] + "'", "command line", "use `prism data prepare` or `prism data vocab`");
  });
}

const Registration reg{{40, "data", "prepare token shards (llm.c format); train a compact BPE vocabulary", run}};

}  // namespace
}  // namespace prism::cli
