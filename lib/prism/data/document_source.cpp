#include "prism/data/document_source.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <map>

#include <fcntl.h>
#include <unistd.h>

#include "prism/data/shuffle.h"
#include "prism/error.h"

namespace prism {

namespace {

// A document of a shuffled text corpus: its text is bytes [offset, offset + length) of its file.
struct IndexedDocument {
  uint64_t offset, length;
  uint32_t file;
};

}  // namespace

struct DocumentSource::Impl {
  std::vector<InputFile> files;
  ReadOptions options;
  uint64_t total = 0;
  // In file order.
  uint32_t file = 0;
  uint64_t next_index = 0;  // in the current file
  uint64_t done_bytes = 0;  // of the files before the current one
  std::unique_ptr<DocumentReader> reader;
  // Shuffled.
  bool shuffled = false;
  std::vector<IndexedDocument> docs;
  uint64_t place = 0, place_bytes = 0;
  std::map<uint32_t, int> fds;
  std::string text;

  ~Impl() { close_all(); }

  void close_all() {
    for (auto& f : fds) ::close(f.second);
    fds.clear();
  }

  void index_documents(uint64_t seed) {
    for (uint32_t f = 0; f < files.size(); ++f) {
      auto r = open_document_reader(files[f], options);
      Record rec;
      std::string_view bytes;
      while (r->next(rec, bytes)) docs.push_back({rec.locator, bytes.size(), f});
    }
    seeded_shuffle(docs, seed);
    total = 0;
    for (const auto& d : docs) total += d.length;
  }

  int fd_of(uint32_t f) {
    auto it = fds.find(f);
    if (it != fds.end()) return it->second;
    if (fds.size() >= 64) close_all();
    int fd = ::open(files[f].path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(fmt::format("cannot open: {}", std::strerror(errno)), files[f].path, "check the file and its permissions");
    fds[f] = fd;
    return fd;
  }

  bool next_shuffled(SourceRecord& r, std::string_view& bytes) {
    if (place >= docs.size()) return false;
    const IndexedDocument& d = docs[place];
    text.resize(d.length);
    for (uint64_t done = 0; done < d.length;) {
      ssize_t n = ::pread(fd_of(d.file), &text[done], d.length - done, static_cast<off_t>(d.offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        throw Error(n < 0 ? fmt::format("cannot read: {}", std::strerror(errno)) : std::string("the file got shorter"),
                    files[d.file].path, "check the file (it must not change while it is prepared)");
      done += static_cast<uint64_t>(n);
    }
    r.record = {Record::Kind::text, place, d.offset};
    r.file = d.file;
    r.position = {0, place};
    bytes = text;
    ++place;
    place_bytes += d.length;
    return true;
  }

  bool next_in_order(SourceRecord& r, std::string_view& bytes) {
    for (;;) {
      if (!reader) {
        if (file >= files.size()) return false;
        reader = open_document_reader(files[file], options);
        if (next_index > 0) reader->skip_to(next_index);
      }
      if (reader->next(r.record, bytes)) {
        r.file = file;
        r.position = {file, r.record.index};
        next_index = r.record.index + 1;
        return true;
      }
      next_file();
    }
  }

  void next_file() {
    reader.reset();
    done_bytes += files[file].bytes;
    ++file;
    next_index = 0;
  }
};

DocumentSource::DocumentSource(std::vector<InputFile> files, ReadOptions options, std::optional<uint64_t> shuffle_seed)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.files = std::move(files);
  m.options = std::move(options);
  for (const auto& f : m.files) m.total += f.bytes;
  if (shuffle_seed) {
    for (const auto& f : m.files)
      if (f.format != InputFormat::text)
        throw Error(fmt::format("a shuffled document order needs text inputs; this one is {}", format_name(f.format)),
                    f.path, "leave out the shuffle seed (llm.c keeps the input order too), or shuffle the files beforehand");
    m.shuffled = true;
    m.index_documents(*shuffle_seed);
  }
}

DocumentSource::~DocumentSource() = default;

void DocumentSource::seek(const SourcePosition& p) {
  Impl& m = *impl_;
  if (m.shuffled) {
    m.place = std::min<uint64_t>(p.index, m.docs.size());
    m.place_bytes = 0;
    for (uint64_t k = 0; k < m.place; ++k) m.place_bytes += m.docs[k].length;
    return;
  }
  m.reader.reset();
  m.file = p.file;
  m.next_index = p.index;
  m.done_bytes = 0;
  for (uint32_t f = 0; f < p.file && f < m.files.size(); ++f) m.done_bytes += m.files[f].bytes;
}

bool DocumentSource::next(SourceRecord& r, std::string_view& bytes) {
  return impl_->shuffled ? impl_->next_shuffled(r, bytes) : impl_->next_in_order(r, bytes);
}

void DocumentSource::skip_file() {
  Impl& m = *impl_;
  if (!m.shuffled && m.file < m.files.size()) m.next_file();
}

SourcePosition DocumentSource::position() const {
  const Impl& m = *impl_;
  if (m.shuffled) return {0, m.place};
  return {m.file, m.next_index};
}

const std::vector<InputFile>& DocumentSource::files() const { return impl_->files; }
const ReadOptions& DocumentSource::options() const { return impl_->options; }

uint64_t DocumentSource::bytes_read() const {
  const Impl& m = *impl_;
  if (m.shuffled) return m.place_bytes;
  return m.done_bytes + (m.reader ? m.reader->bytes_read() : 0);
}

uint64_t DocumentSource::bytes_total() const { return impl_->total; }

}  // namespace prism
