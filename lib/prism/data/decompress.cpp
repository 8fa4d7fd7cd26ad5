#include "prism/data/decompress.h"

#include <fmt/format.h>
#include <zlib.h>
#if PRISM_WITH_ZSTD
#include <zstd.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prism/data/input_error.h"

namespace prism {

namespace {

constexpr size_t kRawBuffer = size_t(256) << 10;  // file bytes read at a time
constexpr size_t kLineRead = size_t(256) << 10;   // decompressed bytes asked for at a time
constexpr const char* kDamagedFix =
    "check the file (gzip -t / zstd -t), fetch it again, or pass --skip-bad to skip the rest of the file";

}  // namespace

const char* compression_name(Compression c) {
  switch (c) {
    case Compression::gzip: return "gzip";
    case Compression::zstd: return "zstd";
    default: return "none";
  }
}

bool zstd_supported() {
#if PRISM_WITH_ZSTD
  return true;
#else
  return false;
#endif
}

struct DecompressedFile::Impl {
  std::string path;
  int fd = -1;
  uint64_t size = 0, raw_read = 0, position = 0;
  Compression compression = Compression::none;
  std::string raw;  // compressed bytes read, not yet consumed
  size_t raw_begin = 0, raw_end = 0;
  bool raw_eof = false;
  z_stream z{};
  bool z_open = false, z_in_member = false;
  std::string pending;  // the damage found after the bytes last returned
#if PRISM_WITH_ZSTD
  ZSTD_DStream* zs = nullptr;
  size_t zs_last = 0;  // ZSTD_decompressStream's last hint: 0 when a frame just ended
  bool zs_started = false;
#endif

  ~Impl() {
    if (z_open) inflateEnd(&z);
#if PRISM_WITH_ZSTD
    if (zs) ZSTD_freeDStream(zs);
#endif
    if (fd >= 0) ::close(fd);
  }

  // Reads more of the file into `raw`; false at its end.
  bool fill_raw() {
    if (raw_eof) return false;
    if (raw_begin == raw_end) raw_begin = raw_end = 0;
    if (raw.size() < kRawBuffer) raw.resize(kRawBuffer);
    if (raw_end == raw.size()) {  // compact
      std::memmove(&raw[0], raw.data() + raw_begin, raw_end - raw_begin);
      raw_end -= raw_begin;
      raw_begin = 0;
    }
    for (;;) {
      ssize_t n = ::read(fd, &raw[raw_end], raw.size() - raw_end);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Error(fmt::format("cannot read: {}", std::strerror(errno)), path, "check the file and the disk");
      if (n == 0) {
        raw_eof = true;
        return false;
      }
      raw_end += static_cast<size_t>(n);
      raw_read += static_cast<uint64_t>(n);
      return true;
    }
  }

  InputError damaged(const std::string& what) const {
    return InputError(fmt::format("{} stream damaged after {} decompressed bytes: {}", compression_name(compression),
                                  position, what),
                      path, kDamagedFix);
  }

  size_t read_plain(char* out, size_t n) {
    if (raw_begin == raw_end && !fill_raw()) return 0;
    size_t k = std::min(n, raw_end - raw_begin);
    std::memcpy(out, raw.data() + raw_begin, k);
    raw_begin += k;
    return k;
  }

  // A damaged stream: the bytes before the damage are returned first, the error on the next read.
  size_t fail(size_t produced, const std::string& what) {
    if (produced == 0) throw damaged(what);
    pending = what;
    return produced;
  }

  size_t read_gzip(char* out, size_t n) {
    size_t produced = 0;
    while (produced < n) {
      if (raw_begin == raw_end && !fill_raw()) {
        if (z_in_member) return fail(produced, "the file ends inside a gzip member (truncated)");
        break;
      }
      if (!z_in_member) {  // a new member starts (or, after the first, trailing garbage would)
        inflateReset(&z);
        z_in_member = true;
      }
      z.next_in = reinterpret_cast<Bytef*>(&raw[raw_begin]);
      z.avail_in = static_cast<uInt>(raw_end - raw_begin);
      z.next_out = reinterpret_cast<Bytef*>(out + produced);
      z.avail_out = static_cast<uInt>(std::min<size_t>(n - produced, 1u << 30));
      int rc = inflate(&z, Z_NO_FLUSH);
      raw_begin = raw_end - z.avail_in;
      produced = static_cast<size_t>(reinterpret_cast<char*>(z.next_out) - out);
      if (rc == Z_STREAM_END) {
        z_in_member = false;
      } else if (rc == Z_BUF_ERROR) {
        continue;  // needs more input (handled above) or more room (the loop ends)
      } else if (rc != Z_OK) {
        return fail(produced, z.msg ? z.msg : fmt::format("zlib error {}", rc));
      }
    }
    return produced;
  }

#if PRISM_WITH_ZSTD
  size_t read_zstd(char* out, size_t n) {
    ZSTD_outBuffer o{out, n, 0};
    while (o.pos < o.size) {
      if (raw_begin == raw_end && !fill_raw()) {
        if (zs_started && zs_last != 0) return fail(o.pos, "the file ends inside a zstd frame (truncated)");
        break;
      }
      ZSTD_inBuffer in{raw.data() + raw_begin, raw_end - raw_begin, 0};
      const size_t before = o.pos;
      zs_last = ZSTD_decompressStream(zs, &o, &in);
      zs_started = true;
      raw_begin += in.pos;
      if (ZSTD_isError(zs_last)) return fail(o.pos, ZSTD_getErrorName(zs_last));
      if (in.pos == 0 && o.pos == before && raw_begin != raw_end) return fail(o.pos, "no progress");
    }
    return o.pos;
  }
#endif
};

DecompressedFile::DecompressedFile(const std::string& path, bool detect) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = path;
  m.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (m.fd < 0) throw Error(fmt::format("cannot open: {}", std::strerror(errno)), path, "check the file and its permissions");
  struct stat st {};
  if (::fstat(m.fd, &st) == 0) m.size = static_cast<uint64_t>(st.st_size);
  if (!detect) return;
  while (m.raw_end - m.raw_begin < 4 && m.fill_raw()) {
  }
  const auto* b = reinterpret_cast<const unsigned char*>(m.raw.data() + m.raw_begin);
  const size_t have = m.raw_end - m.raw_begin;
  if (have >= 2 && b[0] == 0x1f && b[1] == 0x8b) {
    m.compression = Compression::gzip;
    if (inflateInit2(&m.z, 15 + 16) != Z_OK) throw Error("cannot start zlib", path, "check free memory");
    m.z_open = true;
  } else if (have >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd) {
    m.compression = Compression::zstd;
#if PRISM_WITH_ZSTD
    m.zs = ZSTD_createDStream();
    if (!m.zs || ZSTD_isError(ZSTD_initDStream(m.zs))) throw Error("cannot start zstd", path, "check free memory");
#else
    throw Error("a zstd-compressed file, and this prism was built without libzstd", path,
                "install libzstd-dev (scripts/setup.sh does) and rebuild, or decompress it first (zstd -d)");
#endif
  }
}

DecompressedFile::~DecompressedFile() = default;

size_t DecompressedFile::read(char* out, size_t n) {
  Impl& m = *impl_;
  if (!m.pending.empty()) throw m.damaged(m.pending);
  size_t got = 0;
  switch (m.compression) {
    case Compression::none: got = m.read_plain(out, n); break;
    case Compression::gzip: got = m.read_gzip(out, n); break;
    case Compression::zstd:
#if PRISM_WITH_ZSTD
      got = m.read_zstd(out, n);
#endif
      break;
  }
  m.position += got;
  return got;
}

void DecompressedFile::skip_to(uint64_t offset) {
  Impl& m = *impl_;
  if (offset < m.position) throw Error("cannot seek backwards", m.path, "reopen the file");
  if (m.compression == Compression::none) {
    const uint64_t buffered = m.raw_end - m.raw_begin;
    const uint64_t ahead = offset - m.position;
    if (ahead <= buffered) {
      m.raw_begin += static_cast<size_t>(ahead);
    } else {
      if (::lseek(m.fd, static_cast<off_t>(m.raw_read + (ahead - buffered)), SEEK_SET) < 0)
        throw Error(fmt::format("cannot seek: {}", std::strerror(errno)), m.path, "check the file");
      m.raw_read += ahead - buffered;
      m.raw_begin = m.raw_end = 0;
    }
    m.position = offset;
    return;
  }
  std::string sink(std::min<uint64_t>(offset - m.position, kRawBuffer), '\0');
  while (m.position < offset) {
    if (read(&sink[0], static_cast<size_t>(std::min<uint64_t>(offset - m.position, sink.size()))) == 0)
      throw InputError(fmt::format("the stream ends at byte {}, before byte {}", m.position, offset), m.path,
                       "the file changed since it was read: start over (delete the partial preparation)");
  }
}

uint64_t DecompressedFile::position() const { return impl_->position; }
uint64_t DecompressedFile::file_bytes_read() const { return impl_->raw_read - (impl_->raw_end - impl_->raw_begin); }
uint64_t DecompressedFile::file_size() const { return impl_->size; }
Compression DecompressedFile::compression() const { return impl_->compression; }
const std::string& DecompressedFile::path() const { return impl_->path; }

LineReader::LineReader(DecompressedFile& file, size_t max_line)
    : file_(&file), max_line_(max_line), buf_offset_(file.position()) {}

// Reads more of the file behind the unread bytes; false at its end.
bool LineReader::fill() {
  if (eof_) return false;
  if (begin_ > 0) {
    std::memmove(&buf_[0], buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    buf_offset_ += begin_;
    begin_ = 0;
  }
  if (buf_.size() - end_ < kLineRead) buf_.resize(std::max<size_t>(buf_.size() * 2, 2 * kLineRead));
  size_t n = file_->read(&buf_[end_], buf_.size() - end_);
  if (n == 0) eof_ = true;
  end_ += n;
  return n > 0;
}

bool LineReader::next(std::string_view& line) {
  size_t scanned = begin_;
  for (;;) {
    const void* nl = std::memchr(buf_.data() + scanned, '\n', end_ - scanned);
    if (nl) {
      const size_t at = static_cast<size_t>(static_cast<const char*>(nl) - buf_.data());
      line = std::string_view(buf_.data() + begin_, at - begin_);
      line_offset_ = buf_offset_ + begin_;
      begin_ = at + 1;
      ++line_number_;
      return true;
    }
    if (end_ - begin_ > max_line_)
      throw InputError(fmt::format("line {} is longer than {} bytes", line_number_ + 1, max_line_), file_->path(),
                       "split the documents into lines of reasonable size, or pass --skip-bad");
    const size_t kept = end_ - begin_;
    if (!fill()) {
      if (kept == 0) return false;
      line = std::string_view(buf_.data() + begin_, end_ - begin_);  // the last line, without '\n'
      line_offset_ = buf_offset_ + begin_;
      begin_ = end_;
      ++line_number_;
      return true;
    }
    scanned = begin_ + kept;
  }
}

}  // namespace prism
