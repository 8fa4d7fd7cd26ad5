#pragma once
// The partial work of a preparation, kept so that `prism data prepare` killed at
// any moment (kill -9, a full disk, bad input) continues from its last complete
// shard when the same command runs again, and writes byte for byte what an
// uninterrupted run writes.
//
// Where: a staging directory beside the output, <parent>/.<output name>.prepare/,
// holding the complete shards, the vocabulary (a trained one, so a resumed run
// tokenises with the same) and resume.json. A shard is written under a temporary
// name and renamed (shard.h), then resume.json is replaced (atomic_file.h): the
// state names only shards that are whole, and a shard it does not name is redone.
// The staging directory never sits inside the output, whose previous shards stay
// untouched until all new ones are written.
//
// resume.json says which settings and inputs it belongs to (the same command with
// other settings, or changed inputs, starts over), the shards, the record holding
// the last token written and how many of its tokens are written, the counters,
// and the records skipped so far. It stays small (no token counts: a resumed run counts
// the kept shards again), so that on a full disk a shard, not the state, meets the end.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "prism/data/document_source.h"

namespace prism {

struct SkippedRecord {
  std::string file;
  std::string problem;  // with its place: "line 7: not valid JSON (...)"
};

struct PrepareState {
  std::string settings;       // what the work depends on (JSON text), compared on resume
  std::vector<std::string> shards;         // file names in the staging directory, val first
  std::vector<uint64_t> shard_tokens;
  SourcePosition resume_at;   // the record holding the last token written
  uint64_t resume_tokens = 0;  // how many of that record's tokens (EOT first) are in the shards
  uint64_t documents = 0, text_bytes = 0, tokens = 0;
  uint64_t skipped = 0;
  std::vector<SkippedRecord> skipped_records;  // the first kMaxListedSkips
  std::string vocab_digest;

  static constexpr size_t kMaxListedSkips = 1000;
  void skip(const std::string& file, const std::string& problem);
};

// The staging directory of `output` (see above), exclusively locked while it exists:
// a second preparation of the same output stops with a clear error.
class PrepareStage {
 public:
  explicit PrepareStage(const std::string& output);
  ~PrepareStage();  // unlocks; the directory stays (remove() drops it)
  PrepareStage(const PrepareStage&) = delete;
  PrepareStage& operator=(const PrepareStage&) = delete;

  const std::string& dir() const { return dir_; }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }

  // The state to continue from: resume.json when it belongs to `settings` and every
  // shard it names is whole. Otherwise the directory is emptied (why: `*why_not`, when
  // there was a state) and nullopt returned.
  std::optional<PrepareState> resume(const std::string& settings, std::string* why_not);
  // Replaces resume.json (atomically).
  void save(const PrepareState& state);
  void clear();   // empties the directory: start over
  void remove();  // the directory too (the work is done, or nothing of it is worth keeping)

 private:
  std::string dir_;
  int lock_fd_ = -1;
};

}  // namespace prism
