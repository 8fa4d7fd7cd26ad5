// The JSONL reader (DocumentReader for .jsonl, plain, gzip or zstd: decompress.h,
// document_reader.h) and document_text on arbitrary file contents. The first
// input byte picks how the rest becomes the file (low 2 bits: as it is, so its
// own magic bytes may make it gzip or zstd; compressed with gzip; with zstd) and
// the text key (bit 2: "text" or "body"). Records read must be the file's
// non-blank lines, in order, with their 1-based line numbers; a record's text is
// the line's string under the key, valid UTF-8, as nlohmann reads it; a reader
// skipped to a line gives the same records from there.
#include <nlohmann/json.hpp>
#include <zlib.h>
#if PRISM_WITH_ZSTD
#include <zstd.h>
#endif

#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "prism/data/decompress.h"
#include "prism/data/document_reader.h"
#include "prism/data/tokenizer.h"

namespace {

std::string gzip(std::string_view s) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, s.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.data()));
  z.avail_in = static_cast<uInt>(s.size());
  z.next_out = reinterpret_cast<Bytef*>(&out[0]);
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t\r\f\v") == std::string_view::npos;
}

struct Read {
  uint64_t line;
  std::string bytes, text, problem;
};

std::vector<Read> read_all(const prism::InputFile& f, const std::string& key, uint64_t skip_to) {
  std::vector<Read> out;
  auto reader = prism::open_document_reader(f, {});
  if (skip_to > 0) reader->skip_to(skip_to);
  prism::Record r;
  std::string_view bytes;
  std::string storage, problem, fix;
  while (reader->next(r, bytes)) {
    const std::string_view text = prism::document_text(prism::InputFormat::jsonl, r, bytes, key, storage, problem, fix);
    if (!problem.empty() && fix.empty()) prism::fuzz::finding("a bad record without a fix: " + problem);
    out.push_back({r.locator, std::string(bytes), std::string(text), problem});
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const prism::fuzz::Scratch scratch;
  if (size < 1) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::string key = (data[0] & 4) ? "body" : "text";
  std::string file(rest);
  const int mode = (data[0] & 3) == 3 ? 0 : data[0] & 3;  // 3: as it is, too
  if (mode == 1) file = gzip(rest);
#if PRISM_WITH_ZSTD
  if (mode == 2) {
    file.assign(ZSTD_compressBound(rest.size()), '\0');
    file.resize(ZSTD_compress(&file[0], file.size(), rest.data(), rest.size(), 3));
  }
#else
  if (mode == 2) return 0;
#endif
  prism::InputFile f;
  f.path = scratch.write("input.jsonl", file);
  f.format = prism::InputFormat::jsonl;
  f.bytes = file.size();
  prism::fuzz::expect_clean([&] {
    const std::vector<Read> all = read_all(f, key, 0);
    if (mode != 0) {  // the file is `rest` compressed: the records are its non-blank lines
      std::vector<std::string_view> lines;
      for (size_t pos = 0; pos < rest.size();) {
        const size_t end = std::min(rest.find('\n', pos), rest.size());
        lines.push_back(rest.substr(pos, end - pos));
        pos = end + 1;
      }
      size_t k = 0;
      for (size_t n = 0; n < lines.size(); ++n) {
        if (blank(lines[n])) continue;
        if (k >= all.size() || all[k].line != n + 1 || all[k].bytes != lines[n])
          prism::fuzz::finding("the records are not the file's non-blank lines with their numbers");
        ++k;
      }
      if (k != all.size()) prism::fuzz::finding("more records than non-blank lines");
    }
    for (size_t k = 0; k < all.size(); ++k) {
      const Read& r = all[k];
      if (k > 0 && r.line <= all[k - 1].line) prism::fuzz::finding("line numbers are not increasing");
      if (r.bytes.find('\n') != std::string::npos) prism::fuzz::finding("a record holds a newline");
      if (!r.problem.empty()) continue;
      if (prism::utf8_error_offset(r.text) != std::string_view::npos) prism::fuzz::finding("a text that is not UTF-8");
      const auto j = nlohmann::json::parse(r.bytes, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains(key) || !j[key].is_string() ||
          j[key].get<std::string>() != r.text)
        prism::fuzz::finding("a text that is not the line's string under the key");
    }
    if (all.size() >= 2) {
      const std::vector<Read> tail = read_all(f, key, all[all.size() / 2].line);
      if (tail.size() != all.size() - all.size() / 2) prism::fuzz::finding("skip_to gives another number of records");
      for (size_t k = 0; k < tail.size(); ++k)
        if (tail[k].bytes != all[all.size() / 2 + k].bytes) prism::fuzz::finding("skip_to gives other records");
    }
  });
  return 0;
}
