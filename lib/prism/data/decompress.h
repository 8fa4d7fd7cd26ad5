#pragma once
// The bytes of an input file, decompressed as they are read: gzip (zlib) and
// zstd (libzstd) streams are recognised by their magic bytes, anything else is
// read as it is. Concatenated streams (pigz, pzstd, `cat a.gz b.gz`) read as
// one. Memory stays at a few buffers whatever the file's size.
//
// Errors are InputError (input_error.h) naming the file: a damaged or truncated
// stream, and a zstd file in a prism built without libzstd (with the fix).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace prism {

enum class Compression { none, gzip, zstd };
const char* compression_name(Compression c);

// Whether this prism reads zstd streams (built with libzstd).
bool zstd_supported();

class DecompressedFile {
 public:
  // `detect`: recognise gzip and zstd by their magic bytes (else: read the bytes as they are).
  explicit DecompressedFile(const std::string& path, bool detect = true);
  ~DecompressedFile();
  DecompressedFile(const DecompressedFile&) = delete;
  DecompressedFile& operator=(const DecompressedFile&) = delete;

  // Up to `n` bytes of the (decompressed) stream into `out`; 0 at its end.
  size_t read(char* out, size_t n);
  // Moves to `offset` of the decompressed stream, forward only (resume): a seek in a
  // plain file, decompressing and dropping the bytes in a compressed one.
  void skip_to(uint64_t offset);

  uint64_t position() const;   // offset in the decompressed stream
  uint64_t file_bytes_read() const;  // bytes of the file consumed (progress)
  uint64_t file_size() const;
  Compression compression() const;
  const std::string& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Lines of a DecompressedFile, split on '\n' (the '\n' not included; a last line
// without one still counts). A line longer than `max_line` bytes is an InputError.
class LineReader {
 public:
  explicit LineReader(DecompressedFile& file, size_t max_line = size_t(1) << 30);
  // The next line, valid until the next call; false at the end of the file.
  bool next(std::string_view& line);
  uint64_t line_number() const { return line_number_; }  // of the last line returned, 1-based
  uint64_t line_offset() const { return line_offset_; }  // its first byte's offset in the stream

 private:
  bool fill();
  DecompressedFile* file_;
  size_t max_line_;
  std::string buf_;
  size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  uint64_t line_number_ = 0, line_offset_ = 0, buf_offset_ = 0;
};

}  // namespace prism
