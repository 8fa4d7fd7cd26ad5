#include "prism/analysis/throughput_bench.h"

#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <sstream>
#include <vector>

#include "prism/error.h"
#include "prism/sweep/local_launcher.h"
#include "prism/sweep/slurm.h"

namespace prism {
namespace {

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The words after "Prism C++, <name> " on the row of `dtype` whose run is `name`.
std::vector<std::string> row_after(const std::string& output, const std::string& dtype, const std::string& name) {
  std::istringstream in(output);
  const std::string key = "Prism C++, " + name + " ";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(dtype + " ", 0) != 0) continue;
    const size_t at = line.find(key);
    if (at != std::string::npos) return words(line.substr(at + key.size()));
  }
  return {};
}

double number(const std::string& word, const std::string& what) {
  try {
    size_t used = 0;
    const double v = std::stod(word, &used);
    if (used > 0) return v;
  } catch (const std::exception&) {
  }
  throw Error(fmt::format("cannot read {} from '{}'", what, word), "prism bench train's table",
              "check that this prism's bench train prints its table as the report expects");
}

// Quoted for the shell only where it needs it, so the command reads as typed.
std::string arg(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                      "0123456789_./,:+=-") == std::string::npos;
  return plain ? s : shell_quote(s);
}

}  // namespace

std::string bench_command(const BenchRequest& r, const std::string& prism) {
  return fmt::format(
      "{} bench train --model {} --vocab {} --heads {} --batch {} --seq {} --dtype {} --threads {} --steps {} "
      "--warmup {} --clock cpu --compare none",
      arg(prism), arg(r.model), r.vocab, arg(r.heads), r.batch, r.seq, arg(r.dtype), r.threads,
      r.steps, r.warmup);
}

BenchResult parse_bench_train(const std::string& output, const std::string& heads, const std::string& dtype) {
  BenchResult b;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("machine: ", 0) == 0) b.machine = line.substr(9);
  // "uniform <compact>": the uniform row's run names its schedule after the word.
  std::vector<std::string> u;
  {
    std::istringstream rows(output);
    for (std::string line; std::getline(rows, line);) {
      const std::string key = "Prism C++, uniform ";
      const size_t at = line.find(key);
      if (line.rfind(dtype + " ", 0) == 0 && at != std::string::npos) {
        u = words(line.substr(at + key.size()));
        break;
      }
    }
  }
  const auto p = row_after(output, dtype, heads);
  if (u.size() < 2 || p.size() < 4 || b.machine.empty())
    throw Error(fmt::format("no {} rows for uniform and {} (or no machine line) in its output", dtype, heads),
                "prism bench train", "run the command by hand and check its table");
  b.uniform_tokens_per_s = number(u[1], "the uniform tokens/s");  // u[0] is the uniform schedule's compact form
  b.tokens_per_s = number(p[0], "the schedule's tokens/s");
  std::string ratio = p[3];
  if (!ratio.empty() && ratio.back() == 'x') ratio.pop_back();
  b.ratio = number(ratio, "the ratio to uniform");
  // "<dtype> <heads> vs uniform: median 1.005x, 95% interval of the median [0.990, 1.021] ..."
  b.ratio_lo = b.ratio_hi = std::nan("");
  std::istringstream lines(output);
  const std::string key = " " + heads + " vs uniform: median ";  // after the dtype, padded to 5
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find(key), open = line.find("interval of the median [");
    if (line.rfind(dtype, 0) != 0 || at == std::string::npos || open == std::string::npos) continue;
    const size_t from = open + std::string("interval of the median [").size(), comma = line.find(", ", from),
                 close = line.find(']', from);
    if (comma == std::string::npos || close == std::string::npos) continue;
    b.ratio_lo = number(line.substr(from, comma - from), "the ratio interval's low end");
    b.ratio_hi = number(line.substr(comma + 2, close - comma - 2), "the ratio interval's high end");
  }
  return b;
}

BenchResult run_bench_train(const BenchRequest& r, const std::string& prism) {
  const std::string cmd = bench_command(r, prism.empty() ? self_executable() : prism);
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) throw Error("cannot start prism bench train", cmd, "check that the prism binary runs");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  if (status != 0) {
    const std::string tail = out.size() > 2000 ? out.substr(out.size() - 2000) : out;
    throw Error(fmt::format("prism bench train failed (status {}): {}", status, tail), cmd,
                "run the command by hand; or report without --bench-steps");
  }
  BenchResult b = parse_bench_train(out, r.heads, r.dtype);
  b.command = bench_command(r, "prism");  // as a reader would type it
  return b;
}

}  // namespace prism
