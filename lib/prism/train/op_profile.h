#pragma once
// Where a training step's time goes, without a trace viewer: self time per
// operation (an op's time minus the time of the ops it called), gathered from
// LibTorch's RecordFunction hooks on the thread that profiles, and summed into
// a few categories (matmuls, attention, casts, norms/activations, loss,
// optimizer, zeroing, embedding, positions (rotary), other). `prism bench train --profile-summary`
// prints it per dtype and arm.
//
// Ops run on the calling thread (autograd runs CPU backward there too); the
// intra-op worker threads' time is inside the op that waits for them. Time
// between ops (C++ glue, the allocator outside any op) is reported apart as
// untracked, so the shares add up to the measured step.
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace prism {

// The category of an op (or autograd node) named `name` whose nearest
// enclosing scope is `scope` ("" for none). Matmuls, casts/copies and
// zero-fills count as such wherever they run; other ops count for what they
// are by name (an attention, loss, optimizer, norm/activation or embedding
// op or node, or a prism:: scope), else for their scope, else as other.
std::string op_category(const std::string& name, const std::string& scope);

// The scope `name` opens for the ops inside it: "attention", "loss",
// "optimizer", "norms/activations", "embedding", "positions", or "" for none.
std::string op_scope(const std::string& name);

struct OpStat {
  double self_s = 0;  // summed over the profiled steps
  int64_t calls = 0;
};

struct OpProfileResult {
  // By (op name, category): one op can count for several categories (an
  // elementwise op in the loss and in the optimizer).
  std::map<std::pair<std::string, std::string>, OpStat> ops;
  double wall_s = 0;                  // wall time while profiling
  int steps = 0;                      // steps profiled (set by the caller)

  double tracked_s() const;
  std::map<std::string, double> by_category() const;  // self seconds
  // The table a researcher reads: per category ms/step and share of the step,
  // then the `top` ops by self time.
  std::string format(const std::string& title, int top = 12) const;
};

// Profiles the ops of the constructing thread until stop(). One at a time.
class OpProfiler {
 public:
  OpProfiler();
  ~OpProfiler();
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;
  OpProfileResult stop();

 private:
  uint64_t handle_ = 0;
  bool running_ = false;
  double start_s_ = 0;
};

}  // namespace prism
