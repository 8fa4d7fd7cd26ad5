#include "prism/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "prism/error.h"

namespace prism {

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    throw Error(fmt::format("cannot create file: {}", std::strerror(errno)), tmp,
                "check that the directory exists and is writable");
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(fmt::format("write failed: {}", std::strerror(err)), tmp,
                  err == ENOSPC ? "free disk space; the previous file under the final name is untouched"
                                : "check the disk; the previous file under the final name is untouched");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("flush failed: {}", std::strerror(err)), tmp, "check the disk and free space");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("rename failed: {}", std::strerror(err)), path, "check permissions of the directory");
  }
}

}  // namespace prism
