#include "prism/data/prepare.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prism/atomic_file.h"
#include "prism/config/config.h"
#include "prism/config/config_node.h"
#include "prism/data/bpe_trainer.h"
#include "prism/data/shard.h"
#include "prism/data/shuffle.h"
#include "prism/data/tokenizer.h"
#include "prism/error.h"

namespace prism {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kManifest = "prepare.json";
// Present while new shards replace old ones: shards beside it are this program's own, unfinished.
constexpr const char* kSwapMarker = ".prepare-swapping";
constexpr uint64_t kChunkBytes = 8u << 20;  // text tokenised between two writes / progress reports
constexpr size_t kChunkDocs = 8192;          // and at most this many documents (files mapped at once)

// A whole input file, memory-mapped read-only.
class MappedText {
 public:
  explicit MappedText(const std::string& path) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(std::string("cannot open: ") + std::strerror(errno), path, "check the file and its permissions");
    struct stat st {};
    ::fstat(fd, &st);
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (m == MAP_FAILED) {
        ::close(fd);
        throw Error(std::string("cannot map: ") + std::strerror(errno), path, "check free memory");
      }
      data_ = static_cast<const char*>(m);
    }
    ::close(fd);
  }
  ~MappedText() {
    if (data_) ::munmap(const_cast<char*>(data_), size_);
  }
  MappedText(const MappedText&) = delete;
  MappedText& operator=(const MappedText&) = delete;
  std::string_view text() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

// A document is a byte range of one input file. Files are mapped only while a
// chunk that needs them is tokenised, so a corpus of a million small files
// never holds a million mappings.
struct Document {
  uint64_t offset, length;
  uint32_t file;
};

bool is_blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; });
}

std::string_view trim_newlines(std::string_view s) {
  while (!s.empty() && (s.front() == '\n' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Cuts one file into documents by the split rule; empty documents are dropped.
void split_documents(std::string_view text, uint32_t file, const PrepareOptions& opt, std::vector<Document>& out) {
  auto add = [&](std::string_view d) {
    if (!is_blank(trim_newlines(d)))
      out.push_back({static_cast<uint64_t>(d.data() - text.data()), static_cast<uint64_t>(d.size()), file});
  };
  if (opt.split == "file") {
    add(text);
    return;
  }
  size_t doc_begin = std::string_view::npos, doc_end = 0, pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(pos, end - pos);
    bool separator = opt.split == "blank-line" ? is_blank(line)
                                               : (line.size() && line.back() == '\r' ? line.substr(0, line.size() - 1)
                                                                                     : line) == opt.marker;
    if (separator) {
      if (doc_begin != std::string_view::npos) add(trim_newlines(text.substr(doc_begin, doc_end - doc_begin)));
      doc_begin = std::string_view::npos;
    } else {
      if (doc_begin == std::string_view::npos) doc_begin = pos;
      doc_end = end;
    }
    pos = end + 1;
  }
  if (doc_begin != std::string_view::npos) add(trim_newlines(text.substr(doc_begin, doc_end - doc_begin)));
}

}  // namespace

std::vector<std::string> text_files(const std::vector<std::string>& inputs, const std::string& fetch_hint) {
  std::vector<std::string> files;
  for (const auto& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::recursive_directory_iterator(in))
        if (e.is_regular_file() && e.path().extension() == ".txt") found.push_back(e.path().string());
      if (found.empty())
        throw Error("no .txt files in the input directory", in,
                    fetch_hint.empty() ? "put the text in .txt files (UTF-8)" : fetch_hint);
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(in, ec)) {
      files.push_back(in);
    } else {
      throw Error("input not found", in, fetch_hint.empty() ? "check the path" : fetch_hint);
    }
  }
  if (files.empty()) throw Error("no input text given", "prism data", "give text files or directories, or --recipe");
  return files;
}

namespace {

std::string shard_name(const std::string& name, size_t index) {
  return fmt::format("{}_{}_{:06d}.bin", name, index == 0 ? "val" : "train", index);
}

// Whether the directory holds shards that must not be replaced without --force: a finished
// preparation, or shards of unknown origin (llm.c's, say). An interrupted preparation of ours
// does not count: redoing it loses nothing.
bool holds_preparation(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  if (fs::exists(dir / kManifest)) return true;
  if (fs::exists(dir / kSwapMarker)) return false;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".bin") return true;
  return false;
}

// Staging directories (.prepare-<pid>) left by a preparation that was killed.
void remove_stale_stages(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.rfind(".prepare-", 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + 9, nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::error_code ec;
      fs::remove_all(e.path(), ec);
    }
  }
}

// A 64-bit FNV-1a digest of a file: names the exact vocabulary in prepare.json.
std::string file_digest(const std::string& path) {
  MappedText text(path);
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : text.text()) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return fmt::format("fnv1a64:{:016x}", h);
}

void write_manifest(const fs::path& file, const PrepareOptions& opt, const PrepareSummary& s,
                    const std::vector<uint64_t>& shard_tokens) {
  nlohmann::json j;
  j["format"] = "llm.c token shards: 256 x int32 header (20240520, 1, count), uint16 token ids of vocab.tiktoken";
  j["recipe"] = opt.recipe;
  j["name"] = opt.name.empty() ? fs::path(opt.output).filename().string() : opt.name;
  j["inputs"] = opt.inputs;
  j["files"] = s.files;
  j["split"] = opt.split;
  if (opt.split == "marker") j["marker"] = opt.marker;
  j["shuffle_seed"] = opt.shuffle_seed ? nlohmann::json(*opt.shuffle_seed) : nlohmann::json(nullptr);
  j["documents"] = s.documents;
  j["bytes"] = s.bytes;
  j["tokens"] = s.tokens;
  j["val_tokens"] = s.val_tokens;
  j["train_tokens"] = s.train_tokens;
  j["shard_tokens"] = opt.shard_tokens;
  j["vocab"] = {{"file", fs::path(s.vocab).filename().string()},
                {"size", s.vocab_size},
                {"end_of_text", s.vocab_size - 1},
                {"trained", s.vocab_trained},
                {"digest", file_digest(s.vocab)},
                {"source", s.vocab_trained ? fmt::format("trained here: {} ids, byte-level BPE with GPT-2's "
                                                         "pre-tokenisation, on the training documents only",
                                                         s.vocab_size)
                                           : (opt.vocab.empty() ? default_vocab_path() : opt.vocab)}};
  j["unigram_val_loss"] = s.unigram_val_loss;
  j["unigram_note"] = "nats per token on the validation shard under add-1/2 smoothed unigram frequencies of the "
                      "training shards: the loss of a model that ignores context";
  j["seconds"] = s.seconds;
  j["prism_version"] = PRISM_VERSION;
  auto& shards = j["shards"] = nlohmann::json::array();
  for (size_t i = 0; i < s.shards.size(); ++i)
    shards.push_back({{"file", fs::path(s.shards[i]).filename().string()}, {"tokens", shard_tokens[i]}});
  write_file_atomic(file.string(), j.dump(2) + "\n");
}

// Collects the token stream into shards: the validation shard, then training shards.
class ShardAssembler {
 public:
  ShardAssembler(fs::path dir, std::string name, uint64_t val_tokens, uint64_t shard_tokens, int vocab_size)
      : dir_(std::move(dir)), name_(std::move(name)), val_(val_tokens), train_(shard_tokens),
        frequency_{std::vector<uint64_t>(static_cast<size_t>(vocab_size)), std::vector<uint64_t>(static_cast<size_t>(vocab_size))} {
    buf_.reserve(std::min<uint64_t>(std::max(val_, train_), 1u << 24));
  }
  void add(TokenId t) {
    buf_.push_back(static_cast<uint16_t>(t));
    ++frequency_[files_.empty() ? 0 : 1][t];
    if (buf_.size() == capacity()) flush();
  }
  void finish() {
    if (!buf_.empty()) flush();
  }
  const std::vector<std::string>& files() const { return files_; }
  const std::vector<uint64_t>& counts() const { return counts_; }

  // Cross-entropy (nats per token) of the validation tokens under the training tokens' frequencies,
  // add-1/2 smoothed (Krichevsky-Trofimov) so that a token unseen in training costs a finite amount.
  double unigram_val_loss() const {
    const auto& val = frequency_[0];
    const auto& train = frequency_[1];
    double n_train = 0, n_val = 0, sum = 0;
    for (size_t v = 0; v < train.size(); ++v) n_train += static_cast<double>(train[v]);
    const double denominator = n_train + 0.5 * static_cast<double>(train.size());
    for (size_t v = 0; v < val.size(); ++v) {
      if (val[v] == 0) continue;
      n_val += static_cast<double>(val[v]);
      sum -= static_cast<double>(val[v]) * std::log((static_cast<double>(train[v]) + 0.5) / denominator);
    }
    return n_val > 0 ? sum / n_val : std::nan("");
  }

 private:
  uint64_t capacity() const { return files_.empty() ? val_ : train_; }
  void flush() {
    std::string file = (dir_ / shard_name(name_, files_.size())).string();
    write_shard(file, buf_);
    files_.push_back(file);
    counts_.push_back(buf_.size());
    buf_.clear();
  }
  fs::path dir_;
  std::string name_;
  uint64_t val_, train_;
  std::vector<uint16_t> buf_;
  std::vector<std::string> files_;
  std::vector<uint64_t> counts_;
  std::vector<uint64_t> frequency_[2];  // token frequencies: [0] validation shard, [1] training shards
};

void check_options(const PrepareOptions& opt) {
  const std::string where = "prism data prepare";
  if (opt.output.empty()) throw Error("no output directory given", where, "pass --output DIR");
  if (opt.split != "file" && opt.split != "blank-line" && opt.split != "marker")
    throw Error("unknown split '" + opt.split + "'", where, "use file, blank-line or marker");
  if (opt.split == "marker" && opt.marker.empty())
    throw Error("split 'marker' needs the marker line", where, "pass --marker TEXT (a line that separates documents)");
  if (opt.val_tokens < 1 || opt.shard_tokens < 1 || opt.shard_tokens > INT32_MAX || opt.val_tokens > INT32_MAX)
    throw Error(fmt::format("val_tokens {} and shard_tokens {} must be in 1..{}", opt.val_tokens, opt.shard_tokens,
                            INT32_MAX),
                where, "choose positive sizes that fit a shard's int32 count");
  if (opt.train_vocab != 0 && !opt.vocab.empty())
    throw Error("both a vocabulary file and a vocabulary to train were given", where,
                "pass --vocab FILE or --train-vocab N (recipe: vocab or vocab_size), not both");
  if (opt.train_vocab != 0 && (opt.train_vocab < 258 || opt.train_vocab > 65536))
    throw Error(fmt::format("a trained vocabulary of {} ids", opt.train_vocab), where,
                "ask for 258 to 65536 ids (e.g. 2048-8192 for a CPU-sized model)");
}

// The input as documents in the order they are tokenised.
struct Corpus {
  std::vector<std::string> files;
  std::vector<Document> docs;
  uint64_t bytes = 0;
};

Corpus read_corpus(const std::vector<std::string>& files, const PrepareOptions& opt) {
  Corpus c;
  c.files = files;
  for (uint32_t f = 0; f < files.size(); ++f) {
    MappedText text(files[f]);
    split_documents(text.text(), f, opt, c.docs);
  }
  for (const auto& d : c.docs) c.bytes += d.length;
  if (c.docs.empty()) throw Error("the input holds no text", files.front(), "give non-empty text files");
  if (opt.shuffle_seed) seeded_shuffle(c.docs, *opt.shuffle_seed);
  return c;
}

// The bytes of document d, read from its file.
std::string document_text(const Corpus& corpus, const Document& d) {
  MappedText text(corpus.files[d.file]);
  return std::string(text.text().substr(d.offset, d.length));
}

// Trains a compact vocabulary on the training documents only. The validation shard is the first
// val_tokens tokens of the document stream; which documents those are depends on the vocabulary, so:
// hold out a prefix of the stream that surely covers them (by bytes, assuming at most 5 bytes per
// token), train on the rest, and check with the trained vocabulary that the prefix holds at least
// val_tokens tokens; otherwise hold out twice as much and train again. Writes the ranks to `path`.
void train_vocabulary(const Corpus& corpus, const PrepareOptions& opt, const std::string& path) {
  const std::vector<Document>& docs = corpus.docs;
  const uint64_t wanted = static_cast<uint64_t>(opt.val_tokens);
  uint64_t hold_bytes = 5 * wanted;
  for (;;) {
    size_t held = 0;
    for (uint64_t bytes = 0; held < docs.size() && bytes < hold_bytes; ++held) bytes += docs[held].length;
    if (held >= docs.size())
      throw Error("too little text to train a vocabulary apart from the validation documents",
                  opt.inputs.size() == 1 ? opt.inputs[0] : "the inputs",
                  "give more text, lower the validation size (val_tokens) or use a fixed vocabulary (--vocab)");
    PieceCounts counts;
    for (size_t d = held; d < docs.size(); ++d) counts.add_text(document_text(corpus, docs[d]));
    BpeTrainOptions bo;
    bo.vocab_size = opt.train_vocab;
    write_tiktoken_ranks(path, train_bpe(counts, bo));
    Gpt2Tokenizer tok(path);
    uint64_t tokens = 0;
    std::vector<TokenId> ids;
    for (size_t d = 0; d < held && tokens < wanted; ++d) {
      ids.clear();
      tok.encode(document_text(corpus, docs[d]), ids);
      tokens += 1 + ids.size();  // EOT, then the document
    }
    if (tokens >= wanted) return;
    hold_bytes *= 2;
  }
}

// The run's vocabulary: trained on the training documents into `path`, or the given
// file (GPT-2's by default), which copy_vocabulary puts at `path` once the shards are
// written (so a full disk fails on a shard first, naming it). Returns the file to read.
std::string stage_vocabulary(const Corpus& corpus, const PrepareOptions& opt, const fs::path& path) {
  if (opt.train_vocab > 0) {
    train_vocabulary(corpus, opt, path.string());
    return path.string();
  }
  return opt.vocab.empty() ? default_vocab_path() : opt.vocab;
}

void copy_vocabulary(const std::string& from, const fs::path& to) {
  if (fs::path(from) == to) return;
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec)
    throw Error(fmt::format("cannot copy the vocabulary beside the shards: {}", ec.message()), to.string(),
                "free disk space (or choose another --output) and rerun; the previous corpus is unchanged");
}

// A staging directory inside the output (.prepare-<pid>), removed when done;
// new shards are written there and replace the old ones only when all are written.
class Stage {
 public:
  explicit Stage(const fs::path& out_dir) : dir_(out_dir / fmt::format(".prepare-{}", ::getpid())) {
    fs::create_directories(out_dir);
    remove_stale_stages(out_dir);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~Stage() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;
  const fs::path& dir() const { return dir_; }

 private:
  fs::path dir_;
};

// Documents [first, end) are tokenised together: about kChunkBytes of text, at most kChunkDocs documents.
size_t chunk_end(const std::vector<Document>& docs, size_t first) {
  size_t last = first;
  for (uint64_t bytes = 0; last < docs.size() && (bytes < kChunkBytes || last == first) && last - first < kChunkDocs; ++last)
    bytes += docs[last].length;
  return last;
}

// Tokenises documents [first, last) on `threads` threads: tokens[d - first] is
// EOT and then document d. The first failure is thrown, naming file and byte.
void tokenize_chunk(const Corpus& corpus, size_t first, size_t last, const Gpt2Tokenizer& tok, int threads,
                    std::vector<std::vector<TokenId>>& tokens) {
  std::map<uint32_t, std::unique_ptr<MappedText>> mapped;  // the files of this chunk
  for (size_t d = first; d < last; ++d)
    if (!mapped.count(corpus.docs[d].file))
      mapped.emplace(corpus.docs[d].file, std::make_unique<MappedText>(corpus.files[corpus.docs[d].file]));
  tokens.assign(last - first, {});
  std::atomic<size_t> next{first};
  std::mutex failure_mutex;
  std::optional<Error> failure;
  auto work = [&] {
    for (size_t d; (d = next++) < last;) {
      const Document& doc = corpus.docs[d];
      const std::string_view text = mapped.at(doc.file)->text().substr(doc.offset, doc.length);
      auto& ids = tokens[d - first];
      ids.reserve(text.size() / 3 + 2);
      ids.push_back(tok.eot());
      try {
        tok.encode(text, ids);
      } catch (const Error& e) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        size_t bad = utf8_error_offset(text);
        if (!failure && bad != std::string_view::npos) {
          failure = Error(fmt::format("not valid UTF-8 at byte {}", doc.offset + bad), corpus.files[doc.file],
                          "convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8) or leave it out");
        } else if (!failure) {
          failure = Error(e.what_part(), corpus.files[doc.file], e.fix());
        }
        next = last;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads && t < static_cast<int>(last - first); ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (failure) throw *failure;
}

// Tokenises the whole corpus into `shards`, chunk by chunk, reporting progress after each.
PrepareProgress tokenize_corpus(const Corpus& corpus, const Gpt2Tokenizer& tok, int threads, ShardAssembler& shards,
                                const PrepareOptions& opt, Clock::time_point start) {
  PrepareProgress progress;
  progress.bytes_total = corpus.bytes;
  std::vector<std::vector<TokenId>> tokens;
  for (size_t first = 0; first < corpus.docs.size();) {
    const size_t last = chunk_end(corpus.docs, first);
    tokenize_chunk(corpus, first, last, tok, threads, tokens);
    for (size_t d = first; d < last; ++d) {
      for (TokenId t : tokens[d - first]) shards.add(t);
      progress.bytes_done += corpus.docs[d].length;
      progress.tokens += tokens[d - first].size();
    }
    progress.documents = last;
    progress.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (opt.progress) opt.progress(progress);
    first = last;
  }
  return progress;
}

// Moves the staged shards over the old names and removes old shards the new set
// does not have; returns the new paths. The caller drops the manifest first and
// writes it last (no manifest = not a finished preparation).
std::vector<std::string> swap_in(const fs::path& out_dir, const std::vector<std::string>& staged) {
  std::vector<std::string> paths, names;
  for (const auto& f : staged) {
    fs::path dst = out_dir / fs::path(f).filename();
    fs::rename(f, dst);
    paths.push_back(dst.string());
    names.push_back(dst.filename().string());
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out_dir)) {
    const std::string fn = e.path().filename().string();
    if (e.is_regular_file() && e.path().extension() == ".bin" && std::find(names.begin(), names.end(), fn) == names.end())
      fs::remove(e.path(), ec);
  }
  return paths;
}

}  // namespace

PrepareSummary prepare_corpus(const PrepareOptions& opt) {
  check_options(opt);
  const auto start = Clock::now();
  const fs::path out_dir(opt.output);
  if (holds_preparation(out_dir) && !opt.force)
    throw Error("the output directory already holds prepared shards", opt.output,
                "pass --force to replace them, or choose another --output");
  const auto files = text_files(opt.inputs, opt.fetch_hint);
  const Corpus corpus = read_corpus(files, opt);

  const Stage stage(out_dir);
  // The vocabulary goes with the shards: trained here, or a copy of the file given.
  const fs::path stage_vocab = stage.dir() / "vocab.tiktoken";
  const std::string vocab_source = stage_vocabulary(corpus, opt, stage_vocab);
  const Gpt2Tokenizer tok(vocab_source);  // checked before any shard: a bad file fails naming the fix
  const std::string name = opt.name.empty() ? out_dir.filename().string() : opt.name;
  ShardAssembler shards(stage.dir(), name.empty() ? "corpus" : name, opt.val_tokens, opt.shard_tokens, tok.vocab_size());
  const int threads = opt.threads > 0 ? opt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const PrepareProgress progress = tokenize_corpus(corpus, tok, threads, shards, opt, start);
  if (progress.tokens <= static_cast<uint64_t>(opt.val_tokens))
    throw Error(fmt::format("the text has {} tokens, not more than the {} of the validation shard: nothing is left to "
                            "train on",
                            progress.tokens, opt.val_tokens),
                opt.inputs.size() == 1 ? opt.inputs[0] : "the inputs", "lower --val-tokens or give more text");
  shards.finish();
  copy_vocabulary(vocab_source, stage_vocab);

  std::error_code ec;
  std::ofstream(out_dir / kSwapMarker).put('\n');
  fs::remove(out_dir / kManifest, ec);
  PrepareSummary s;
  s.output = opt.output;
  s.shards = swap_in(out_dir, shards.files());
  fs::rename(stage_vocab, out_dir / "vocab.tiktoken");
  s.vocab = (out_dir / "vocab.tiktoken").string();
  s.vocab_size = tok.vocab_size();
  s.vocab_trained = opt.train_vocab > 0;
  s.unigram_val_loss = shards.unigram_val_loss();
  s.files = files.size();
  s.documents = corpus.docs.size();
  s.bytes = corpus.bytes;
  s.tokens = progress.tokens;
  s.val_tokens = shards.counts().front();
  s.train_tokens = s.tokens - s.val_tokens;
  s.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  write_manifest(out_dir / kManifest, opt, s, shards.counts());
  fs::remove(out_dir / kSwapMarker, ec);
  return s;
}

std::optional<PrepareSummary> read_prepared(const std::string& dir) {
  fs::path file = fs::path(dir) / kManifest;
  std::ifstream in(file);
  if (!in) return std::nullopt;
  try {
    auto j = nlohmann::json::parse(in);
    PrepareSummary s;
    s.output = dir;
    s.files = j.at("files").get<uint64_t>();
    s.documents = j.at("documents").get<uint64_t>();
    s.bytes = j.at("bytes").get<uint64_t>();
    s.tokens = j.at("tokens").get<uint64_t>();
    s.val_tokens = j.at("val_tokens").get<uint64_t>();
    s.train_tokens = j.at("train_tokens").get<uint64_t>();
    s.seconds = j.at("seconds").get<double>();
    for (const auto& sh : j.at("shards")) s.shards.push_back((fs::path(dir) / sh.at("file").get<std::string>()).string());
    // Manifests before compact vocabularies name none: those corpora are GPT-2's.
    if (j.contains("vocab")) {
      const auto& v = j.at("vocab");
      s.vocab = (fs::path(dir) / v.at("file").get<std::string>()).string();
      s.vocab_size = v.at("size").get<int>();
      s.vocab_trained = v.at("trained").get<bool>();
    }
    if (j.contains("unigram_val_loss") && j.at("unigram_val_loss").is_number())
      s.unigram_val_loss = j.at("unigram_val_loss").get<double>();
    return s;
  } catch (const std::exception& e) {
    throw Error(std::string("damaged manifest: ") + e.what(), file.string(), "prepare the data again with --force");
  }
}

PrepareOptions load_recipe(const std::string& name_or_path) {
  fs::path file(name_or_path);
  if (file.extension() != ".yaml" && file.extension() != ".yml") file = fs::path("data/recipes") / (name_or_path + ".yaml");
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    std::string known;
    if (fs::is_directory("data/recipes", ec))
      for (const auto& e : fs::directory_iterator("data/recipes"))
        if (e.path().extension() == ".yaml") known += (known.empty() ? "" : ", ") + e.path().stem().string();
    throw Error("recipe not found", file.string(),
                known.empty() ? "run from the repository root, or give the recipe file's path"
                              : "use one of: " + known + " (from the repository root), or give a recipe file's path");
  }
  ConfigNode node(load_yaml_file(file.string()), file.string());
  const fs::path base = file.parent_path();
  auto resolve = [&](const std::string& p) { return fs::path(p).is_absolute() ? p : (base / p).lexically_normal().string(); };
  PrepareOptions o;
  o.recipe = file.stem().string();
  o.name = node.get<std::string>("name", o.recipe);
  YAML::Node in = node.raw("input");
  if (!in) throw Error("missing required key 'input'", file.string(), "add input: <text file or directory>");
  if (in.IsSequence())
    for (const auto& i : in) o.inputs.push_back(resolve(i.as<std::string>()));
  else
    o.inputs.push_back(resolve(in.as<std::string>()));
  o.output = resolve(node.require<std::string>("output"));
  o.split = node.get_choice("split", "file", {"file", "blank-line", "marker"});
  o.marker = node.get<std::string>("marker", "");
  o.val_tokens = node.get_int("val_tokens", o.val_tokens, 1, INT32_MAX);
  o.shard_tokens = node.get_int("shard_tokens", o.shard_tokens, 1, INT32_MAX);
  if (auto seed = node.maybe<uint64_t>("shuffle_seed")) o.shuffle_seed = *seed;
  if (auto fetch = node.maybe<std::string>("fetch")) o.fetch_hint = "run " + *fetch + " first (it fetches the text)";
  if (auto v = node.maybe<std::string>("vocab")) o.vocab = resolve(*v);
  if (node.has("vocab_size")) o.train_vocab = static_cast<int>(node.get_int("vocab_size", 4096, 258, 65536));
  node.get<std::string>("license", "");      // documentation only
  node.get<std::string>("description", "");  // documentation only
  node.finish();
  return o;
}

std::optional<std::string> recipe_for_output(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory("data/recipes", ec)) return std::nullopt;
  const fs::path want = fs::weakly_canonical(dir, ec);
  std::vector<fs::path> recipes;
  for (const auto& e : fs::directory_iterator("data/recipes", ec))
    if (e.path().extension() == ".yaml") recipes.push_back(e.path());
  std::sort(recipes.begin(), recipes.end());
  for (const auto& r : recipes) {
    try {
      if (fs::weakly_canonical(load_recipe(r.string()).output, ec) == want) return r.stem().string();
    } catch (const std::exception&) {
      // a broken recipe names nothing; `prism data prepare --recipe` reports it when used
    }
  }
  return std::nullopt;
}

std::string prepare_hint(const std::string& dir) {
  if (const auto name = recipe_for_output(dir))
    return fmt::format("prepare it with `prism data prepare --recipe {}` (data/recipes/{}.yaml writes this directory; "
                       "from the repository root)",
                       *name, *name);
  return "prepare the data with `prism data prepare` (e.g. --recipe austen-bpe), or give a directory of llm.c shards";
}

}  // namespace prism
