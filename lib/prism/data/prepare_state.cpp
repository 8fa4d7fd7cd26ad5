#include "prism/data/prepare_state.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "prism/atomic_file.h"
#include "prism/data/shard.h"
#include "prism/error.h"

namespace prism {

namespace fs = std::filesystem;

namespace {

constexpr const char* kState = "resume.json";
constexpr const char* kLock = "lock";

fs::path stage_path(const std::string& output) {
  fs::path out = fs::absolute(output).lexically_normal();
  if (out.filename().empty()) out = out.parent_path();
  return out.parent_path() / ("." + out.filename().string() + ".prepare");
}

nlohmann::json to_json(const PrepareState& s) {
  nlohmann::json j;
  j["settings"] = s.settings;
  j["shards"] = s.shards;
  j["shard_tokens"] = s.shard_tokens;
  j["resume_at"] = {{"file", s.resume_at.file}, {"index", s.resume_at.index}, {"tokens_written", s.resume_tokens}};
  j["documents"] = s.documents;
  j["text_bytes"] = s.text_bytes;
  j["tokens"] = s.tokens;
  j["skipped"] = s.skipped;
  auto& list = j["skipped_records"] = nlohmann::json::array();
  for (const auto& r : s.skipped_records) list.push_back({{"file", r.file}, {"problem", r.problem}});
  j["vocab_digest"] = s.vocab_digest;
  return j;
}

PrepareState from_json(const nlohmann::json& j) {
  PrepareState s;
  s.settings = j.at("settings").get<std::string>();
  s.shards = j.at("shards").get<std::vector<std::string>>();
  s.shard_tokens = j.at("shard_tokens").get<std::vector<uint64_t>>();
  const auto& at = j.at("resume_at");
  s.resume_at = {at.at("file").get<uint32_t>(), at.at("index").get<uint64_t>()};
  s.resume_tokens = at.at("tokens_written").get<uint64_t>();
  s.documents = j.at("documents").get<uint64_t>();
  s.text_bytes = j.at("text_bytes").get<uint64_t>();
  s.tokens = j.at("tokens").get<uint64_t>();
  s.skipped = j.at("skipped").get<uint64_t>();
  for (const auto& r : j.at("skipped_records"))
    s.skipped_records.push_back({r.at("file").get<std::string>(), r.at("problem").get<std::string>()});
  s.vocab_digest = j.at("vocab_digest").get<std::string>();
  if (s.shards.size() != s.shard_tokens.size() || s.shards.empty()) throw std::runtime_error("inconsistent shard list");
  return s;
}

}  // namespace

void PrepareState::skip(const std::string& file, const std::string& problem) {
  ++skipped;
  if (skipped_records.size() < kMaxListedSkips) skipped_records.push_back({file, problem});
}

PrepareStage::PrepareStage(const std::string& output) : dir_(stage_path(output).string()) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec)
    throw Error(fmt::format("cannot create the staging directory: {}", ec.message()), dir_,
                "the directory that holds the output must be writable");
  // A lock file, not the directory: flock on NFS becomes a POSIX lock, which needs a file open
  // for writing. Where the file system has no locks at all, the preparation goes on unlocked.
  lock_fd_ = ::open((fs::path(dir_) / kLock).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ >= 0 && ::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      ::close(lock_fd_);
      lock_fd_ = -1;
      throw Error("another `prism data prepare` is writing this output", dir_,
                  "wait for it to finish (or stop it); a second run continues where the first stopped");
    }
  }
}

PrepareStage::~PrepareStage() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock
}

std::optional<PrepareState> PrepareStage::resume(const std::string& settings, std::string* why_not) {
  const fs::path state_file = fs::path(dir_) / kState;
  std::optional<PrepareState> state;
  std::string why;
  if (fs::exists(state_file)) {
    try {
      std::ifstream in(state_file);
      state = from_json(nlohmann::json::parse(in));
      if (state->settings != settings) {
        why = "it was made with other settings, or the inputs changed since";
        state.reset();
      }
      for (size_t i = 0; state && i < state->shards.size(); ++i) {
        const std::string p = (fs::path(dir_) / state->shards[i]).string();
        if (!fs::exists(p) || shard_token_count(p) != state->shard_tokens[i]) {
          why = "its shard " + state->shards[i] + " is missing or damaged";
          state.reset();
        }
      }
    } catch (const std::exception& e) {
      why = std::string("its resume.json is damaged (") + e.what() + ")";
      state.reset();
    }
    if (!state && why_not) *why_not = why;
  }
  // Keep what the state names (and the trained vocabulary); everything else is stale.
  std::set<std::string> keep = {kLock};
  if (state) {
    keep.insert(state->shards.begin(), state->shards.end());
    keep.insert(kState);
    keep.insert("vocab.tiktoken");
  }
  for (const auto& e : fs::directory_iterator(dir_)) {
    if (keep.count(e.path().filename().string())) continue;
    std::error_code ec;
    fs::remove_all(e.path(), ec);
  }
  return state;
}

void PrepareStage::save(const PrepareState& state) {
  write_file_atomic((fs::path(dir_) / kState).string(), to_json(state).dump() + "\n");
}

void PrepareStage::clear() {
  for (const auto& e : fs::directory_iterator(dir_)) {
    if (e.path().filename() == kLock) continue;
    std::error_code ec;
    fs::remove_all(e.path(), ec);
  }
}

void PrepareStage::remove() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

}  // namespace prism
