#pragma once
// Runs a check in a child process whose address space is capped (RLIMIT_AS), so
// a reader that would allocate gigabytes for a damaged file fails the test
// instead of the machine. Under AddressSanitizer (which reserves terabytes of
// shadow memory) the cap stays off and ASan's allocator reports such an
// allocation itself.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>

namespace prism::test {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// What `body` returned in the child, or "exception: <what>", or "died: <status>".
// The child may map `headroom` bytes beyond what the process maps already.
inline std::string in_capped_child(size_t headroom, const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return "died: no pipe";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    if (!kAddressSanitizer) {
      size_t pages = 0;
      if (FILE* f = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(f, "%zu", &pages) != 1) pages = 0;
        std::fclose(f);
      }
      const size_t cap = pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE)) + headroom;
      struct rlimit limit {cap, cap};
      ::setrlimit(RLIMIT_AS, &limit);
    }
    std::string out;
    try {
      out = body();
    } catch (const std::exception& e) {
      out = std::string("exception: ") + e.what();
    }
    const ssize_t n = ::write(fds[1], out.data(), out.size());
    ::_exit(n == static_cast<ssize_t>(out.size()) ? 0 : 1);
  }
  ::close(fds[1]);
  std::string report;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) report.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "died: status " + std::to_string(status) + " " + report;
  return report;
}

}  // namespace prism::test
