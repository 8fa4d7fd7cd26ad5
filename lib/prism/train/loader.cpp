#include "prism/train/loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "prism/data/prepare.h"
#include "prism/data/shard.h"
#include "prism/data/shuffle.h"
#include "prism/error.h"

namespace prism {

struct TokenLoader::Impl {
  std::vector<TokenShard> shards;
  std::vector<uint64_t> first_window;  // per shard, then W at the end
  uint64_t windows = 0, global_batch = 0, steps = 0;
  int64_t tokens = 0;
  uint64_t fingerprint = 0;
  std::vector<uint32_t> order;  // this epoch's window numbers (shuffled loaders only)
  LoaderState st;

  void make_order(bool shuffle) {
    if (!shuffle) return;
    order.resize(windows);
    for (uint64_t i = 0; i < windows; ++i) order[i] = static_cast<uint32_t>(i);
    seeded_shuffle(order, hash_combine(hash_combine(0x5052495300000000ULL, st.seed), st.epoch));  // "PRIS"
  }

  // Window w: its shard and the offset of its first token there (T+1 tokens follow).
  std::pair<size_t, uint64_t> locate(uint64_t w, int64_t T) const {
    size_t s = static_cast<size_t>(std::upper_bound(first_window.begin(), first_window.end(), w) - first_window.begin()) - 1;
    return {s, (w - first_window[s]) * static_cast<uint64_t>(T)};
  }
};

namespace {

[[noreturn]] void token_out_of_vocabulary(const TokenShard& shard, uint64_t offset, int64_t vocab_size) {
  const int token = shard[offset];
  throw Error(fmt::format("token id {} at token offset {} (byte {}) is outside the model's vocabulary of {} ids "
                          "(0..{})",
                          token, offset, kShardHeaderBytes + 2 * offset, vocab_size, vocab_size - 1),
              shard.path(),
              "train on shards made with the model's vocabulary (prepare.json names it), or set model.vocab_size to "
              "the vocabulary the shards were made with");
}

}  // namespace

TokenLoader::TokenLoader(LoaderOptions opt) : impl_(std::make_shared<Impl>()), opt_(std::move(opt)) {
  const std::string where = "data loader";
  if (opt_.shards.empty()) throw Error("no token shards given", where, "point the data path at a prepared corpus directory");
  if (opt_.batch < 1 || opt_.seq_len < 1)
    throw Error(fmt::format("batch {} and sequence length {} must be at least 1", opt_.batch, opt_.seq_len), where,
                "set a positive batch size and sequence length");
  if (opt_.world_size < 1 || opt_.rank < 0 || opt_.rank >= opt_.world_size)
    throw Error(fmt::format("rank {} is outside world size {}", opt_.rank, opt_.world_size), where,
                "give 0 <= rank < world_size");
  auto& m = *impl_;
  const uint64_t T = static_cast<uint64_t>(opt_.seq_len);
  if (opt_.accum < 1)
    throw Error(fmt::format("{} micro-batches per step", opt_.accum), where, "give at least one micro-batch per step");
  m.global_batch = static_cast<uint64_t>(opt_.batch) * static_cast<uint64_t>(opt_.world_size);
  const uint64_t step_windows = m.global_batch * static_cast<uint64_t>(opt_.accum);
  // The step's windows, not their split into ranks and micro-batches: a state carries over between world sizes.
  uint64_t fp = hash_combine(hash_combine(hash_combine(1, T), step_windows), opt_.shuffle ? 1 : 0);
  for (const auto& path : opt_.shards) {
    TokenShard shard(path);
    if (shard.size() < T + 1)
      throw Error(fmt::format("the shard has {} tokens, fewer than one window of T+1 = {} tokens", shard.size(), T + 1),
                  path, "lower T (the sequence length) or prepare more data into this shard");
    m.first_window.push_back(m.windows);
    m.windows += (shard.size() - 1) / T;
    m.tokens += static_cast<int64_t>(shard.size());
    fp = hash_combine(fp, shard.size());
    m.shards.push_back(std::move(shard));
  }
  m.first_window.push_back(m.windows);
  if (opt_.shuffle && m.windows > UINT32_MAX)
    throw Error(fmt::format("{} windows are more than a shuffled loader numbers", m.windows), where,
                "use a longer sequence length or fewer shards per loader");
  m.steps = m.windows / step_windows * static_cast<uint64_t>(opt_.accum);
  if (m.steps == 0)
    throw Error(fmt::format("the shards hold {} windows of T+1 = {} tokens, fewer than one batch of B x world_size = {} x {}{}",
                            m.windows, T + 1, opt_.batch, opt_.world_size,
                            opt_.accum > 1 ? fmt::format(" times {} micro-batches per step", opt_.accum) : ""),
                opt_.shards.size() == 1 ? opt_.shards[0] : std::filesystem::path(opt_.shards[0]).parent_path().string(),
                "lower the batch size or T, or prepare more data");
  m.fingerprint = fp ? fp : 1;
  m.st.seed = opt_.seed;
  m.st.fingerprint = m.fingerprint;
  m.st.batch_windows = m.global_batch;
  m.make_order(opt_.shuffle);
}

std::pair<torch::Tensor, torch::Tensor> TokenLoader::next() {
  auto& m = *impl_;
  if (m.st.position >= m.steps) {
    ++m.st.epoch;
    m.st.position = 0;
    m.make_order(opt_.shuffle);
  }
  const int64_t B = opt_.batch, T = opt_.seq_len;
  auto x = torch::empty({B, T}, torch::kInt64), y = torch::empty({B, T}, torch::kInt64);
  int64_t* xp = x.data_ptr<int64_t>();
  int64_t* yp = y.data_ptr<int64_t>();
  const uint64_t first = m.st.position * m.global_batch + static_cast<uint64_t>(opt_.rank * B);
  // uint16 ids cannot reach a vocabulary of 65536 or more: only a smaller one needs the check.
  const bool check = opt_.vocab_size > 0 && opt_.vocab_size < 65536;
  const uint16_t limit = check ? static_cast<uint16_t>(opt_.vocab_size - 1) : 0xFFFF;
  for (int64_t b = 0; b < B; ++b) {
    uint64_t i = first + static_cast<uint64_t>(b);
    const auto [s, offset] = m.locate(opt_.shuffle ? m.order[i] : i, T);
    const uint16_t* w = m.shards[s].tokens() + offset;
    uint16_t top = 0;
    for (int64_t t = 0; t < T; ++t) {
      xp[b * T + t] = w[t];
      yp[b * T + t] = w[t + 1];
      top = std::max(top, w[t]);
    }
    top = std::max(top, w[T]);
    if (top > limit) {
      for (int64_t t = 0; t <= T; ++t)
        if (w[t] > limit) token_out_of_vocabulary(m.shards[s], offset + static_cast<uint64_t>(t), opt_.vocab_size);
    }
  }
  ++m.st.position;
  return {x, y};
}

LoaderState TokenLoader::state() const { return impl_->st; }

void TokenLoader::restore(const LoaderState& s) {
  auto& m = *impl_;
  if (s.fingerprint != 0 && s.fingerprint != m.fingerprint)
    throw Error("the saved loader state belongs to other data or another shape (shards, T, B x world_size or shuffle)",
                "resume state", "resume with the same data, sequence length, global batch and shuffle setting");
  uint64_t position = s.position;
  if (s.batch_windows != 0 && s.batch_windows != m.global_batch) {  // another split of the same global batch
    const uint64_t done = s.position * s.batch_windows;
    if (done % m.global_batch != 0)
      throw Error(fmt::format("the saved position ({} windows into the epoch) is not a whole number of batches of B x "
                              "world_size = {}",
                              done, m.global_batch),
                  "resume state", "resume with a batch size and world size whose product divides the step's windows");
    position = done / m.global_batch;
  }
  if (position > m.steps)
    throw Error(fmt::format("the saved position {} is past the {} steps of an epoch", s.position, m.steps), "resume state",
                "resume with the same data and batch shape");
  bool reorder = s.seed != m.st.seed || s.epoch != m.st.epoch;
  m.st.seed = s.seed;
  m.st.epoch = s.epoch;
  m.st.position = position;
  if (reorder) m.make_order(opt_.shuffle);
}

void TokenLoader::reset() {
  auto& m = *impl_;
  bool reorder = m.st.epoch != 0;
  m.st.epoch = 0;
  m.st.position = 0;
  if (reorder) m.make_order(opt_.shuffle);
}

int64_t TokenLoader::tokens() const { return impl_->tokens; }
int64_t TokenLoader::batches_per_epoch() const { return static_cast<int64_t>(impl_->steps); }
int64_t TokenLoader::windows() const { return static_cast<int64_t>(impl_->windows); }

std::vector<std::string> find_shards(const std::string& dir, const std::string& split) {
  namespace fs = std::filesystem;
  if (split != "train" && split != "val")
    throw Error("unknown split '" + split + "'", dir, "ask for \"train\" or \"val\"");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error("data directory not found", dir, prepare_hint(dir));
  std::vector<std::string> all;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".bin") all.push_back(e.path().string());
  std::sort(all.begin(), all.end());
  if (all.empty())
    throw Error("no .bin token shards in the directory", dir, prepare_hint(dir));
  auto named = [](const std::string& p, const std::string& s) {  // fineweb_val_000000.bin, tiny_shakespeare_val.bin
    std::string stem = fs::path(p).stem().string(), tag = "_" + s;
    return stem.find(tag + "_") != std::string::npos ||
           (stem.size() >= tag.size() && stem.compare(stem.size() - tag.size(), tag.size(), tag) == 0);
  };
  bool any_named = std::any_of(all.begin(), all.end(), [&](const auto& p) { return named(p, "val") || named(p, "train"); });
  std::vector<std::string> out;
  if (any_named) {
    std::copy_if(all.begin(), all.end(), std::back_inserter(out), [&](const auto& p) { return named(p, split); });
  } else if (split == "val") {
    out.push_back(all.front());
  } else {
    out.assign(all.begin() + 1, all.end());
  }
  if (out.empty())
    throw Error(fmt::format("no {} shards among the {} shards here", split, all.size()), dir,
                fmt::format("prepare the data again (shard 0 is validation, the rest training), or add *_{}_*.bin shards",
                            split));
  return out;
}

}  // namespace prism
