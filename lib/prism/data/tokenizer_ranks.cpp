#include "prism/data/tokenizer_ranks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "prism/error.h"

namespace prism {

namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Strict standard base64 (with padding); false on any malformed input.
bool base64_decode(std::string_view in, std::string& out) {
  out.clear();
  if (in.empty() || in.size() % 4 != 0) return false;
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      char c = in[i + k];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
      } else if (pad > 0 || (v[k] = base64_value(c)) < 0) {
        return false;
      }
    }
    uint32_t w = (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) | (uint32_t(v[2]) << 6) | uint32_t(v[3]);
    out.push_back(char(w >> 16));
    if (pad < 2) out.push_back(char((w >> 8) & 0xff));
    if (pad < 1) out.push_back(char(w & 0xff));
  }
  return true;
}

}  // namespace

BpeRanks BpeRanks::load(const std::string& path, const std::string& fix_hint) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("vocabulary file not found", path, fix_hint);
  BpeRanks r;
  // (rank, line, bytes) in file order; ranks are checked once all are read, so a
  // damaged rank (one digit too many) costs an error, not gigabytes of empty slots.
  struct Entry {
    uint64_t rank;
    size_t line;
    std::string bytes;
  };
  std::vector<Entry> entries;
  std::string line, bytes;
  size_t line_no = 0;
  auto bad = [&](const std::string& what) {
    return Error(what, fmt::format("{}:{}", path, line_no),
                 "the file is damaged or not a tiktoken ranks file; delete it and " + fix_hint);
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    size_t sp = line.find(' ');
    if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos)
      throw bad("expected 'base64-token rank', got '" + line.substr(0, 60) + "'");
    if (!base64_decode(std::string_view(line).substr(0, sp), bytes))
      throw bad("the token '" + line.substr(0, std::min<size_t>(sp, 60)) + "' is not valid base64");
    std::string_view num = std::string_view(line).substr(sp + 1);
    uint64_t rank = 0;
    if (num.empty() || num.size() > 9) throw bad("rank '" + std::string(num) + "' is not a number below 10^9");
    for (char c : num) {
      if (c < '0' || c > '9') throw bad("rank '" + std::string(num) + "' is not a number");
      rank = rank * 10 + uint64_t(c - '0');
    }
    entries.push_back({rank, line_no, bytes});
  }
  if (in.bad()) throw Error("cannot read the vocabulary file", path, fix_hint);
  if (entries.empty()) throw Error("the vocabulary file is empty", path, "delete it and " + fix_hint);
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.rank < b.rank; });
  std::vector<std::string> by_rank;
  by_rank.reserve(entries.size());
  for (auto& e : entries) {
    if (e.rank < by_rank.size()) {
      line_no = e.line;
      throw bad(fmt::format("rank {} appears twice", e.rank));
    }
    if (e.rank > by_rank.size())
      throw Error(fmt::format("rank {} is missing (ranks must be 0..{} without gaps)", by_rank.size(),
                              entries.back().rank),
                  path, "the file is truncated or damaged; delete it and " + fix_hint);
    by_rank.push_back(std::move(e.bytes));
  }

  for (const auto& b : by_rank) {
    r.offsets_.push_back(static_cast<uint32_t>(r.arena_.size()));
    r.lengths_.push_back(static_cast<uint32_t>(b.size()));
    r.arena_ += b;
  }
  r.build_index(path, fix_hint);
  for (int b = 0; b < 256; ++b)
    if (r.byte_rank_[b] == kNone)
      throw Error(fmt::format("byte 0x{:02x} has no rank: a byte-level BPE needs all 256 single bytes", b), path,
                  "delete it and " + fix_hint);
  return r;
}

void BpeRanks::build_index(const std::string& path, const std::string& fix_hint) {
  size_t cap = 1;
  while (cap < 2 * offsets_.size()) cap <<= 1;  // load factor <= 1/2 keeps probes short
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  std::fill(std::begin(byte_rank_), std::end(byte_rank_), kNone);
  for (uint32_t rank = 0; rank < offsets_.size(); ++rank) {
    std::string_view b = bytes(rank);
    if (b.size() == 1) byte_rank_[static_cast<unsigned char>(b[0])] = rank;
    uint64_t h = hash(b.data(), b.size());
    size_t i = h & mask_;
    while (slots_[i].rank != kNone) {
      if (bytes(slots_[i].rank) == b)
        throw Error(fmt::format("the token of rank {} is the same as that of rank {}", rank, slots_[i].rank), path,
                    "the file is damaged; delete it and " + fix_hint);
      i = (i + 1) & mask_;
    }
    slots_[i] = Slot{prefix(b.data(), b.size()), rank, static_cast<uint32_t>(b.size())};
  }
}

}  // namespace prism
