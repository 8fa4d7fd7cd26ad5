#include "prism/data/prepare.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <signal.h>
#include <unistd.h>

#include "prism/atomic_file.h"
#include "prism/config/config.h"
#include "prism/config/config_node.h"
#include "prism/data/bpe_trainer.h"
#include "prism/data/document_source.h"
#include "prism/data/input_error.h"
#include "prism/data/prepare_state.h"
#include "prism/data/shard.h"
#include "prism/data/shard_sequence.h"
#include "prism/data/token_pipeline.h"
#include "prism/data/tokenizer.h"
#include "prism/error.h"

namespace prism {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kManifest = "prepare.json";
// Present while new shards replace old ones: shards beside it are this program's own, unfinished.
constexpr const char* kSwapMarker = ".prepare-swapping";

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

std::vector<std::string> text_files(const std::vector<std::string>& inputs, const std::string& fetch_hint) {
  std::vector<std::string> paths;
  for (const auto& f : input_files(inputs, "text", fetch_hint)) paths.push_back(f.path);
  return paths;
}

namespace {

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

// Staging directories (.prepare-<pid>) that prism versions before resumable preparation left
// inside the output when killed.
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
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read the vocabulary", path, "check the file (data/get-vocab.sh fetches GPT-2's)");
  uint64_t h = 0xcbf29ce484222325ULL;
  char buf[1 << 16];
  while (in) {
    in.read(buf, sizeof buf);
    for (std::streamsize i = 0; i < in.gcount(); ++i) h = (h ^ static_cast<unsigned char>(buf[i])) * 0x100000001b3ULL;
  }
  return fmt::format("fnv1a64:{:016x}", h);
}

void write_manifest(const fs::path& file, const PrepareOptions& opt, const PrepareSummary& s,
                    const std::vector<InputFile>& files, const PrepareState& state) {
  nlohmann::json j;
  j["format"] = "llm.c token shards: 256 x int32 header (20240520, 1, count), uint16 token ids of vocab.tiktoken";
  j["recipe"] = opt.recipe;
  j["name"] = opt.name.empty() ? fs::path(opt.output).filename().string() : opt.name;
  j["inputs"] = opt.inputs;
  j["files"] = s.files;
  std::map<std::string, uint64_t> formats;
  for (const auto& f : files) ++formats[format_name(f.format)];
  j["input_formats"] = formats;
  if (formats.count("text")) {
    j["split"] = opt.split;
    if (opt.split == "marker") j["marker"] = opt.marker;
  }
  if (formats.count("jsonl")) j["text_key"] = opt.text_key;
  if (formats.count("parquet")) j["text_column"] = opt.text_column;
  j["shuffle_seed"] = opt.shuffle_seed ? nlohmann::json(*opt.shuffle_seed) : nlohmann::json(nullptr);
  j["max_tokens"] = opt.max_tokens > 0 ? nlohmann::json(opt.max_tokens) : nlohmann::json(nullptr);
  j["documents"] = s.documents;
  j["bytes"] = s.bytes;
  j["tokens"] = s.tokens;
  j["val_tokens"] = s.val_tokens;
  j["train_tokens"] = s.train_tokens;
  j["shard_tokens"] = opt.shard_tokens;
  j["skip_bad"] = opt.skip_bad;
  j["skipped"] = s.skipped;
  auto& skipped = j["skipped_records"] = nlohmann::json::array();
  for (const auto& r : state.skipped_records) skipped.push_back({{"file", r.file}, {"problem", r.problem}});
  if (state.skipped > state.skipped_records.size())
    j["skipped_note"] = fmt::format("the first {} of {} skipped records are listed", state.skipped_records.size(), state.skipped);
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
  j["resumed_shards"] = s.resumed_shards;
  j["prism_version"] = PRISM_VERSION;
  auto& shards = j["shards"] = nlohmann::json::array();
  for (size_t i = 0; i < s.shards.size(); ++i)
    shards.push_back({{"file", fs::path(s.shards[i]).filename().string()}, {"tokens", state.shard_tokens[i]}});
  write_file_atomic(file.string(), j.dump(2) + "\n");
}

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
  if (opt.text_key.empty() || opt.text_column.empty())
    throw Error("an empty text key or column name", where, "name the text with --text-key / --text-column (default: text)");
}

ReadOptions read_options(const PrepareOptions& opt) {
  ReadOptions r;
  r.split = opt.split;
  r.marker = opt.marker;
  r.text_key = opt.text_key;
  r.text_column = opt.text_column;
  return r;
}

std::string where_inputs(const PrepareOptions& opt) { return opt.inputs.size() == 1 ? opt.inputs[0] : "the inputs"; }

// What the shards depend on, as JSON text: a stopped preparation continues only under the same.
// Not in it: the thread count (the shards do not depend on it) and --skip-bad (see prepare_in_stage).
std::string settings_text(const PrepareOptions& opt, const std::vector<InputFile>& files, const std::string& vocab) {
  nlohmann::json j;
  auto& in = j["inputs"] = nlohmann::json::array();
  for (const auto& f : files)
    in.push_back({fs::absolute(f.path).lexically_normal().string(), format_name(f.format), f.bytes, f.mtime_ns});
  j["read"] = {opt.split, opt.marker, opt.text_key, opt.text_column};
  j["shuffle_seed"] = opt.shuffle_seed ? nlohmann::json(*opt.shuffle_seed) : nlohmann::json(nullptr);
  j["vocab"] = opt.train_vocab > 0 ? nlohmann::json(fmt::format("trained:{}", opt.train_vocab)) : nlohmann::json(file_digest(vocab));
  j["sizes"] = {opt.val_tokens, opt.shard_tokens, opt.max_tokens};
  j["name"] = opt.name.empty() ? fs::path(opt.output).filename().string() : opt.name;
  return j.dump();
}

// Calls f(text) for every document of the source, from its start, in order, on this thread.
// A bad record stops with its error, or is skipped with skip_bad.
template <class F>
void for_each_document(DocumentSource& source, const PrepareOptions& opt, F&& f) {
  source.seek({0, 0});
  SourceRecord r;
  std::string_view bytes;
  std::string storage, problem, fix;
  for (;;) {
    try {
      if (!source.next(r, bytes)) return;
    } catch (const InputError&) {
      if (!opt.skip_bad) throw;
      source.skip_file();
      continue;
    }
    const InputFile& file = source.files()[r.file];
    const std::string_view text = document_text(file.format, r.record, bytes, opt.text_key, storage, problem, fix);
    if (!problem.empty()) {
      if (opt.skip_bad) continue;
      throw InputError(problem, file.path, fix);
    }
    if (!f(text)) return;
  }
}

// Trains a compact vocabulary on the training documents only. The validation shard is the first
// val_tokens tokens of the document stream; which documents those are depends on the vocabulary, so:
// hold out a prefix of the stream that surely covers them (by bytes, assuming at most 5 bytes per
// token), train on the rest, and check with the trained vocabulary that the prefix holds at least
// val_tokens tokens; otherwise hold out twice as much and train again. Writes the ranks to `path`.
void train_vocabulary(DocumentSource& source, const PrepareOptions& opt, const std::string& path) {
  const uint64_t wanted = static_cast<uint64_t>(opt.val_tokens);
  for (uint64_t hold_bytes = 5 * wanted;; hold_bytes *= 2) {
    uint64_t held = 0, seen = 0, bytes = 0;
    PieceCounts counts;
    for_each_document(source, opt, [&](std::string_view text) {
      if (bytes < hold_bytes) {
        bytes += text.size();
        ++held;
      } else {
        counts.add_text(text);
      }
      ++seen;
      return true;
    });
    if (held >= seen)
      throw Error("too little text to train a vocabulary apart from the validation documents", where_inputs(opt),
                  "give more text, lower the validation size (val_tokens) or use a fixed vocabulary (--vocab)");
    BpeTrainOptions bo;
    bo.vocab_size = opt.train_vocab;
    write_tiktoken_ranks(path, train_bpe(counts, bo));
    Gpt2Tokenizer tok(path);
    uint64_t tokens = 0, d = 0;
    std::vector<TokenId> ids;
    for_each_document(source, opt, [&](std::string_view text) {
      ids.clear();
      tok.encode(text, ids);
      tokens += 1 + ids.size();  // EOT, then the document
      return ++d < held && tokens < wanted;
    });
    if (tokens >= wanted) return;
  }
}

// The counts a run reports as it goes, and keeps in its state.
struct Run {
  PrepareState state;
  PrepareProgress progress;
  Clock::time_point start;
  size_t* kept = nullptr;  // complete shards saved in the stage
};

void report(const PrepareOptions& opt, Run& run, const ShardSequence& shards, uint64_t bytes_done) {
  PrepareProgress& p = run.progress;
  p.bytes_done = bytes_done;
  p.text_bytes = run.state.text_bytes;
  p.documents = run.state.documents;
  p.tokens = shards.tokens();
  p.skipped = run.state.skipped;
  p.shards = shards.files().size();
  p.seconds = since(run.start);
  if (opt.progress) opt.progress(p);
}

// Tokenises the source from where the state stopped (or its start) into `shards`, saving the
// state after each complete shard. Returns once the source is exhausted or max_tokens reached.
void tokenize_into_shards(DocumentSource& source, const Gpt2Tokenizer& tok, ShardSequence& shards, PrepareStage& stage,
                          const PrepareOptions& opt, bool resumed, Run& run) {
  PrepareState& st = run.state;
  source.seek(resumed ? st.resume_at : SourcePosition{});
  PipelineOptions po;
  po.threads = opt.threads > 0 ? opt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  po.batch_bytes = std::max<size_t>(opt.batch_bytes, 1);
  po.skip_bad_files = opt.skip_bad;
  TokenPipeline pipeline(source, tok, po);
  bool first = resumed;
  const uint64_t max = opt.max_tokens > 0 ? opt.max_tokens : UINT64_MAX;
  TokenBatch batch;
  while (shards.tokens() < max && pipeline.next(batch)) {
    size_t at = 0;
    for (const TokenizedRecord& r : batch.records) {
      const std::string& path = source.files()[r.file].path;
      if (!r.problem.empty()) {
        if (!opt.skip_bad) throw InputError(r.problem, path, r.fix);
        st.skip(path, r.problem);
        continue;
      }
      const uint16_t* t = batch.tokens.data() + at;
      at += r.tokens;
      uint64_t k = 0;
      if (first) {  // the record the stopped run was in: its first tokens are in the kept shards
        if (r.position.file != st.resume_at.file || r.position.index != st.resume_at.index || r.tokens < st.resume_tokens)
          throw Error("the inputs do not continue where the stopped preparation was", path,
                      "delete " + stage.dir() + " and prepare again");
        k = st.resume_tokens;
        first = false;
      } else {
        ++st.documents;
        st.text_bytes += r.text_bytes;
      }
      for (; k < r.tokens && shards.tokens() < max; ++k) {
        if (!shards.add(t[k])) continue;
        st.resume_at = r.position;
        st.resume_tokens = k + 1;
        st.tokens = shards.tokens();
        shards.record(st);
        stage.save(st);
        *run.kept = shards.files().size();
      }
      if (shards.tokens() >= max) break;
    }
    report(opt, run, shards, batch.records.empty() ? source.bytes_read() : batch.records.back().input_bytes);
    if (batch.error) throw *batch.error;
  }
}

void copy_vocabulary(const std::string& from, const fs::path& to) {
  if (fs::path(from) == to) return;
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec)
    throw Error(fmt::format("cannot copy the vocabulary beside the shards: {}", ec.message()), to.string(),
                "free disk space (or choose another --output) and rerun; the previous corpus is unchanged");
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


// The stopped run to continue from, if one fits this run; a notice says why one does not.
std::optional<PrepareState> resumable(const PrepareOptions& opt, PrepareStage& stage, const std::string& settings) {
  std::string why;
  std::optional<PrepareState> resumed = stage.resume(settings, &why);
  // A stopped run that skipped bad records made shards a run without --skip-bad would not make.
  // (The other way round is sound: a run stopped by bad input wrote only shards before it.)
  if (resumed && resumed->skipped > 0 && !opt.skip_bad) {
    why = fmt::format("it skipped {} bad records (--skip-bad) and this run does not skip", resumed->skipped);
    resumed.reset();
    stage.clear();
  }
  // A trained vocabulary comes from the stopped run: the kept shards are in its ids.
  const std::string staged_vocab = stage.file("vocab.tiktoken");
  if (resumed && opt.train_vocab > 0 && (!fs::exists(staged_vocab) || file_digest(staged_vocab) != resumed->vocab_digest)) {
    why = "its trained vocabulary is missing or changed";
    resumed.reset();
    stage.clear();
  }
  if (!why.empty() && opt.notice)
    opt.notice(fmt::format("starting over: the stopped preparation in {} does not fit: {}", stage.dir(), why));
  return resumed;
}

// Moves the staged shards and vocabulary into the output, prepare.json last (its presence
// means the shards are whole).
PrepareSummary publish(const PrepareOptions& opt, const std::vector<InputFile>& files, const ShardSequence& shards,
                       const Run& run, const Gpt2Tokenizer& tok, const std::string& staged_vocab, size_t resumed_shards,
                       Clock::time_point start) {
  const fs::path out_dir(opt.output);
  std::error_code ec;
  std::ofstream(out_dir / kSwapMarker).put('\n');
  fs::remove(out_dir / kManifest, ec);
  PrepareSummary s;
  s.output = opt.output;
  s.shards = swap_in(out_dir, shards.files());
  fs::rename(staged_vocab, out_dir / "vocab.tiktoken");
  s.vocab = (out_dir / "vocab.tiktoken").string();
  s.vocab_size = tok.vocab_size();
  s.vocab_trained = opt.train_vocab > 0;
  s.unigram_val_loss = shards.unigram_val_loss();
  s.files = files.size();
  s.documents = run.state.documents;
  s.bytes = run.state.text_bytes;
  s.tokens = shards.tokens();
  s.val_tokens = shards.counts().front();
  s.train_tokens = s.tokens - s.val_tokens;
  s.skipped = run.state.skipped;
  s.resumed_shards = resumed_shards;
  s.seconds = since(start);
  write_manifest(out_dir / kManifest, opt, s, files, run.state);
  fs::remove(out_dir / kSwapMarker, ec);
  return s;
}

// The preparation proper, in the staging directory; `kept` is set once there is work worth
// keeping for a rerun (a complete shard).
PrepareSummary prepare_in_stage(const PrepareOptions& opt, const std::vector<InputFile>& files, PrepareStage& stage,
                                Clock::time_point start, size_t& kept) {
  auto notice = [&](const std::string& line) {
    if (opt.notice) opt.notice(line);
  };
  const fs::path out_dir(opt.output);
  DocumentSource source(files, read_options(opt), opt.shuffle_seed);
  const std::string given_vocab = opt.vocab.empty() ? default_vocab_path() : opt.vocab;
  std::optional<Gpt2Tokenizer> tokenizer;
  if (opt.train_vocab == 0) tokenizer.emplace(given_vocab);  // a bad vocabulary fails here, naming the fix
  const std::string settings = settings_text(opt, files, given_vocab);
  const std::optional<PrepareState> resumed = resumable(opt, stage, settings);
  const std::string staged_vocab = stage.file("vocab.tiktoken");
  if (opt.train_vocab > 0 && !resumed) train_vocabulary(source, opt, staged_vocab);
  const std::string vocab_source = opt.train_vocab > 0 ? staged_vocab : given_vocab;
  if (opt.train_vocab > 0) tokenizer.emplace(vocab_source);
  const Gpt2Tokenizer& tok = *tokenizer;
  const std::string name = opt.name.empty() ? out_dir.filename().string() : opt.name;
  ShardSequence shards(stage.dir(), name.empty() ? "corpus" : name, static_cast<uint64_t>(opt.val_tokens),
                       static_cast<uint64_t>(opt.shard_tokens), tok.vocab_size());

  Run run;
  run.start = start;
  run.kept = &kept;
  run.progress.bytes_total = source.bytes_total();
  run.progress.max_tokens = opt.max_tokens;
  if (resumed) {
    run.state = *resumed;
    shards.restore(*resumed);
    kept = resumed->shards.size();
    run.progress.resumed_tokens = shards.tokens();
    run.progress.resumed_text_bytes = resumed->text_bytes;
    source.seek(resumed->resume_at);
    run.progress.resumed_bytes = source.bytes_read();
    notice(fmt::format("resuming: {} complete shards ({} tokens) of a stopped run, kept in {}", kept, shards.tokens(),
                       stage.dir()));
  }
  run.state.settings = settings;
  run.state.vocab_digest = file_digest(vocab_source);
  tokenize_into_shards(source, tok, shards, stage, opt, resumed.has_value(), run);
  kept = std::max(kept, shards.files().size());
  if (shards.tokens() <= static_cast<uint64_t>(opt.val_tokens))
    throw Error(fmt::format("the text has {} tokens, not more than the {} of the validation shard: nothing is left to "
                            "train on",
                            shards.tokens(), opt.val_tokens),
                where_inputs(opt), "lower --val-tokens or give more text");
  shards.finish();
  shards.record(run.state);
  run.progress.done = true;
  const bool cut = opt.max_tokens > 0 && shards.tokens() >= opt.max_tokens;  // the rest of the input stays unread
  report(opt, run, shards, cut ? run.progress.bytes_done : source.bytes_total());
  copy_vocabulary(vocab_source, staged_vocab);
  return publish(opt, files, shards, run, tok, staged_vocab, resumed ? resumed->shards.size() : 0, start);
}

}  // namespace

PrepareSummary prepare_corpus(const PrepareOptions& opt) {
  check_options(opt);
  const auto start = Clock::now();
  const fs::path out_dir(opt.output);
  if (holds_preparation(out_dir) && !opt.force)
    throw Error("the output directory already holds prepared shards", opt.output,
                "pass --force to replace them, or choose another --output");
  const std::vector<InputFile> files = input_files(opt.inputs, opt.format, opt.fetch_hint);
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw Error(fmt::format("cannot create the output directory: {}", ec.message()), opt.output, "check the path and permissions");
  remove_stale_stages(out_dir);
  PrepareStage stage(opt.output);
  size_t kept = 0;
  try {
    PrepareSummary s = prepare_in_stage(opt, files, stage, start, kept);
    stage.remove();
    return s;
  } catch (const Error& e) {
    if (kept == 0) {
      stage.remove();
      throw;
    }
    const std::string more =
        fmt::format("{}{} complete shard{} kept in {}: the same command continues from there",
                    e.fix().empty() ? "" : e.fix() + "; ", kept, kept == 1 ? " is" : "s are", stage.dir());
    if (dynamic_cast<const InputError*>(&e)) throw InputError(e.what_part(), e.where(), more);
    throw Error(e.what_part(), e.where(), more);
  } catch (...) {
    if (kept == 0) stage.remove();
    throw;
  }
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
  o.format = node.get_choice("format", "auto", {"auto", "text", "jsonl", "parquet"});
  o.text_key = node.get<std::string>("text_key", o.text_key);
  o.text_column = node.get<std::string>("text_column", o.text_column);
  o.max_tokens = static_cast<uint64_t>(node.get_int("max_tokens", 0, 0, INT64_MAX));
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
