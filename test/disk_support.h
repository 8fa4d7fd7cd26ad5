#pragma once
// A small disk that really fills up, for the full-disk tests: a tmpfs of a few
// MiB mounted on a fresh directory, so writes fail with ENOSPC exactly as on a
// full disk (no fault injection: every writer, HDF5 included, meets the real
// error). Mounting needs root with CAP_SYS_ADMIN; where that is missing the
// tests report themselves skipped with the reason.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "support.h"

namespace prism::test {

class SmallDisk {
 public:
  explicit SmallDisk(size_t bytes) {
    if (::geteuid() != 0) {
      why_not_ = "mounting a small tmpfs needs root (run prism_tests as root to test a full disk)";
      return;
    }
    const std::string options = "size=" + std::to_string(bytes) + ",mode=0755";
    if (::mount("tmpfs", dir_.path().c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
      why_not_ = std::string("cannot mount a tmpfs (") + std::strerror(errno) +
                 "); a container needs CAP_SYS_ADMIN to test a full disk";
      return;
    }
    mounted_ = true;
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(dir_.path().c_str(), MNT_DETACH);
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& why_not() const { return why_not_; }
  const std::string& path() const { return dir_.path(); }
  std::string file(const std::string& name) const { return dir_.file(name); }

  size_t free_bytes() const {
    struct statvfs s {};
    ::statvfs(path().c_str(), &s);
    return static_cast<size_t>(s.f_bavail) * s.f_frsize;
  }
  // Writes a filler file until at most `leave` bytes stay free (0: the disk is full).
  void fill(size_t leave = 0) {
    const int fd = ::open(file(".filler").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return;
    const std::vector<char> block(4096, 'x');
    while (free_bytes() > leave) {
      const size_t n = std::min(block.size(), free_bytes() - leave);
      if (::write(fd, block.data(), n) <= 0) break;
    }
    ::close(fd);
  }
  // Frees what fill() took.
  void free_space() { std::filesystem::remove(file(".filler")); }

 private:
  TempDir dir_{"prism-small-disk"};
  bool mounted_ = false;
  std::string why_not_;
};

}  // namespace prism::test
