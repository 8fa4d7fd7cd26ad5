#include "prism/train/op_profile.h"

#include <ATen/record_function.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "prism/error.h"

namespace prism {

namespace {

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

bool any_of(const std::string& s, std::initializer_list<const char*> parts) {
  return std::any_of(parts.begin(), parts.end(), [&](const char* p) { return has(s, p); });
}

bool one_of(const std::string& s, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return s == n; });
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Frame {
  std::string name, scope;
  double start = 0, children = 0;
};

// The one running profiler's state. Only its owner thread touches the stack and
// the table; other threads' callbacks return at the thread check.
struct State {
  std::thread::id owner;
  std::vector<Frame> stack;
  std::map<std::pair<std::string, std::string>, OpStat> ops;
};
State* active = nullptr;

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  State* s = active;
  if (!s || std::this_thread::get_id() != s->owner) return nullptr;
  Frame f;
  f.name = fn.name();
  const std::string own = op_scope(f.name);
  f.scope = !own.empty() ? own : s->stack.empty() ? std::string() : s->stack.back().scope;
  f.start = now_s();
  s->stack.push_back(std::move(f));
  return nullptr;
}

void on_end(const at::RecordFunction&, at::ObserverContext*) {
  State* s = active;
  if (!s || std::this_thread::get_id() != s->owner || s->stack.empty()) return;
  Frame f = std::move(s->stack.back());
  s->stack.pop_back();
  const double total = now_s() - f.start;
  const std::string parent_scope = s->stack.empty() ? std::string() : s->stack.back().scope;
  if (!s->stack.empty()) s->stack.back().children += total;
  const std::string category = op_category(f.name, parent_scope);
  OpStat& st = s->ops[{std::move(f.name), category}];
  st.self_s += std::max(0.0, total - f.children);
  st.calls += 1;
}

}  // namespace

namespace {

// The autograd engine wraps each backward node in a record named
// "autograd::engine::evaluate_function: <Node>": the node's name says what it is.
std::string node_name(const std::string& name) {
  static const std::string prefix = "autograd::engine::evaluate_function: ";
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

// Kinds of work that count as themselves wherever they run.
std::string leaf_category(const std::string& name) {
  if (one_of(name, {"aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm", "aten::baddbmm", "aten::matmul",
                    "aten::linear", "aten::_addmm_activation", "aten::addbmm", "aten::mv", "aten::addmv_"}) ||
      has(name, "mkldnn_linear") || has(name, "mkldnn_matmul"))
    return "matmul";
  if (one_of(name, {"aten::to", "aten::_to_copy", "aten::copy_", "aten::contiguous", "aten::clone",
                    "ToCopyBackward0", "CloneBackward0"}))
    return "casts/copies";
  if (one_of(name, {"aten::zeros", "aten::zeros_like", "aten::zero_", "aten::fill_", "aten::full", "aten::full_like",
                    "aten::ones", "aten::ones_like", "aten::new_zeros"}))
    return "zero/fill";
  return "";
}

}  // namespace

std::string op_scope(const std::string& raw) {
  const std::string name = node_name(raw);
  if (any_of(name, {"scaled_dot_product", "FusedAttention", "prism::attention"})) return "attention";
  if (any_of(name, {"LmHeadCrossEntropy", "prism::lm_head_loss", "cross_entropy", "log_softmax", "nll_loss",
                    "LogSoftmax", "NllLoss"}))
    return "loss";
  if (any_of(name, {"prism::optimizer", "adamw", "adam_", "clip_grad"})) return "optimizer";
  if (any_of(name, {"layer_norm", "LayerNorm", "gelu", "Gelu", "dropout", "Dropout", "relu", "Relu", "tanh", "Tanh"}))
    return "norms/activations";
  if (any_of(name, {"embedding", "Embedding"})) return "embedding";
  if (any_of(name, {"prism::rope", "RotaryPositions"})) return "positions";
  return "";
}

std::string op_category(const std::string& name, const std::string& scope) {
  if (std::string leaf = leaf_category(node_name(name)); !leaf.empty()) return leaf;
  if (std::string own = op_scope(name); !own.empty()) return own;
  if (!scope.empty()) return scope;
  // Gradient sums the autograd engine makes between nodes (a tensor used twice).
  if (name == "aten::add_") return "autograd grad sums";
  return "other";
}

namespace {

// Short names for the table: autograd's node records and custom functions'
// C++ types are long and say the useful part last.
std::string display_name(const std::string& raw) {
  std::string name = node_name(raw);
  const bool node = name.size() != raw.size();
  static const std::string cpp_node = "torch::autograd::CppNode<";
  if (name.rfind(cpp_node, 0) == 0 && name.back() == '>') {
    name = name.substr(cpp_node.size(), name.size() - cpp_node.size() - 1);
    if (const size_t colon = name.rfind("::"); colon != std::string::npos) name = name.substr(colon + 2);
    name += " backward";
  }
  if (node) name = "[node] " + name;
  return name.size() > 52 ? name.substr(0, 49) + "..." : name;
}

}  // namespace

double OpProfileResult::tracked_s() const {
  double t = 0;
  for (const auto& [key, st] : ops) t += st.self_s;
  return t;
}

std::map<std::string, double> OpProfileResult::by_category() const {
  std::map<std::string, double> c;
  for (const auto& [key, st] : ops) c[key.second] += st.self_s;
  return c;
}

std::string OpProfileResult::format(const std::string& title, int top) const {
  const double n = std::max(1, steps);
  const double step_ms = 1e3 * wall_s / n;
  auto share = [&](double s) { return wall_s > 0 ? 100.0 * s / wall_s : 0.0; };
  std::string out = fmt::format("{}: {} profiled step{}, {:.1f} ms/step (wall, profiler on)\n", title, steps,
                                steps == 1 ? "" : "s", step_ms);
  std::vector<std::pair<std::string, double>> cats;
  for (const auto& [c, s] : by_category()) cats.emplace_back(c, s);
  cats.emplace_back("untracked (between ops)", std::max(0.0, wall_s - tracked_s()));
  std::sort(cats.begin(), cats.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  out += fmt::format("  {:<26} {:>10} {:>7}\n", "category", "ms/step", "share");
  for (const auto& [c, s] : cats) out += fmt::format("  {:<26} {:>10.2f} {:>6.1f}%\n", c, 1e3 * s / n, share(s));
  std::vector<std::pair<std::pair<std::string, std::string>, OpStat>> sorted(ops.begin(), ops.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.self_s > b.second.self_s; });
  out += fmt::format("  top {} operations by self time:\n", std::min<size_t>(top, sorted.size()));
  out += fmt::format("  {:<52} {:<18} {:>9} {:>7} {:>10}\n", "operation", "category", "ms/step", "share", "calls/step");
  for (size_t i = 0; i < sorted.size() && static_cast<int>(i) < top; ++i) {
    const auto& [key, st] = sorted[i];
    const std::string& name = key.first;
    const std::string shown = display_name(name);
    out += fmt::format("  {:<52} {:<18} {:>9.2f} {:>6.1f}% {:>10.1f}\n", shown, key.second, 1e3 * st.self_s / n,
                       share(st.self_s), static_cast<double>(st.calls) / n);
  }
  return out;
}

OpProfiler::OpProfiler() {
  if (active)
    throw Error("an op profiler is already running", "OpProfiler", "stop the running profiler before starting another");
  auto* s = new State;
  s->owner = std::this_thread::get_id();
  active = s;
  handle_ = at::addGlobalCallback(at::RecordFunctionCallback(&on_start, &on_end)
                                      .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                                               at::RecordScope::USER_SCOPE}));
  running_ = true;
  start_s_ = now_s();
}

OpProfileResult OpProfiler::stop() {
  OpProfileResult r;
  if (!running_) return r;
  r.wall_s = now_s() - start_s_;
  at::removeCallback(handle_);
  running_ = false;
  State* s = active;
  active = nullptr;
  r.ops = std::move(s->ops);
  delete s;
  return r;
}

OpProfiler::~OpProfiler() { stop(); }

}  // namespace prism
