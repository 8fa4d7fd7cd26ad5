#include "prism/search/search_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

#include "prism/config/compose.h"
#include "prism/config/schedule_section.h"
#include "prism/data/dataset.h"
#include "prism/error.h"
#include "prism/folder_name.h"
#include "prism/schedule/enumerate.h"
#include "prism/sweep/grid.h"
#include "prism/sweep/halving.h"

namespace fs = std::filesystem;

namespace prism {

namespace {

const char* const kSpaceFix =
    "give exactly one of search.space.heads: [1, 2, 4, 8], search.space.enumerate: {head_dims: [64]} or "
    "search.space.schedules: [[...], ...]";

std::vector<HeadSchedule> parse_schedule_list(const YAML::Node& list, const std::string& where) {
  if (!list.IsSequence()) throw Error("a list of schedules is expected", where, "write e.g. [[1, 1, 4, 4], \"2x2,4x2\"]");
  std::vector<HeadSchedule> out;
  for (size_t i = 0; i < list.size(); ++i) out.push_back(parse_heads(list[i], fmt::format("{}[{}]", where, i)));
  return out;
}

ScheduleSpace parse_space(ConfigNode n, const Config& c) {
  const ModelConfig& m = c.model;
  int forms = n.has("heads") + n.has("enumerate") + n.has("schedules");
  if (forms != 1) throw Error(fmt::format("search.space gives {} forms", forms), n.source() + " key search.space", kSpaceFix);
  ScheduleSpace space;
  if (n.has("heads")) {
    const auto heads = n.get<std::vector<int>>("heads", {});
    for (int h : heads)
      if (h <= 0 || m.d_model % h != 0)
        throw Error(fmt::format("{} heads do not divide d_model = {}", h, m.d_model), n.where("heads"),
                    "list head counts that divide model.d_model");
    if (heads.size() < 2) throw Error("a product space needs two head counts or more", n.where("heads"), kSpaceFix);
    space = ScheduleSpace::product(m.n_layer, heads, m.n_head, n.get<bool>("hard_rules", false));
  } else if (n.has("enumerate")) {
    EnumerationSpace sp = parse_enumeration_section(n.child("enumerate"), m);
    space = ScheduleSpace::list(enumerate_schedules(sp), m.n_head);
  } else {
    space = ScheduleSpace::list(parse_schedule_list(n.raw("schedules"), n.where("schedules")), m.n_head);
    for (const auto& s : space.listed()) require_runnable_schedule(s, m.n_layer, m.d_model, n.where("schedules"));
  }
  n.finish();
  if (space.size() < 2)
    throw Error(fmt::format("the search space holds {:.0f} schedule", space.size()), n.source() + " key search.space",
                "give a space of two schedules or more");
  return space;
}

MixtureSettings parse_mixture(ConfigNode n) {
  MixtureSettings s;
  s.lr = n.get_real("lr", s.lr, 0.0, 10.0);
  if (n.has("tau")) {
    auto tau = n.get<std::vector<double>>("tau", {});
    if (tau.size() != 2 || !(tau[0] > 0) || !(tau[1] > 0) || tau[1] > tau[0])
      throw Error("search.mixture.tau must be [start, end] with start >= end > 0", n.where("tau"),
                  "write e.g. tau: [1.0, 0.05]");
    s.tau_start = tau[0];
    s.tau_end = tau[1];
  }
  s.start = n.get_real("start", s.start, 0.0, 1.0);
  s.paths = static_cast<int>(n.get_int("paths", s.paths, 0, 1 << 20));
  if (s.paths == 1)
    throw Error("search.mixture.paths is 1: one count per layer gives the architecture weights no gradient",
                n.where("paths"), "use paths: 2 (two sampled counts per layer), 0 (every count), or method: spos");
  n.finish();
  return s;
}

FinetuneSettings parse_finetune(ConfigNode n) {
  FinetuneSettings f;
  f.steps = n.get_int("steps", f.steps, 0, 1LL << 40);
  f.lr = n.get_real("lr", f.lr, 0.0, 1e4);
  f.warmup_steps = n.get_int("warmup_steps", f.warmup_steps, -1, 1LL << 40);
  f.schedules = n.get_int("schedules", f.schedules, 0, 1LL << 30);
  if (n.has("halving")) {
    // One seed per schedule: the noise rule and the seeds per rung of a sweep's halving do not apply.
    ConfigNode h = n.child("halving");
    f.halving.enabled = true;
    f.halving.eta = static_cast<int>(h.get_int("eta", f.halving.eta, 2, 1000));
    f.halving.min_steps = h.get_int("min_steps", 0, 0, 1LL << 40);
    const int64_t first = first_rung_budget(f.steps, f.halving);
    if (f.steps > 0 && first >= f.steps)
      throw Error(fmt::format("search.finetune.halving's first rung of {} steps leaves no room below finetune.steps = {}",
                              first, f.steps),
                  h.where("min_steps"), fmt::format("set min_steps between 1 and {}", f.steps - 1));
    h.finish();
  }
  n.finish();
  return f;
}

RankSettings parse_rank(ConfigNode n, const Config& c) {
  RankSettings r;
  r.batches = n.get_int("batches", r.batches, 0, 1LL << 30);
  r.exact_limit = n.get_int("exact_limit", r.exact_limit, 0, 1LL << 30);
  r.probes = n.get_int("probes", r.probes, 0, 1LL << 30);
  r.probe_batches = n.get_int("probe_batches", r.probe_batches, 1, 1LL << 30);
  r.candidates = n.get_int("candidates", r.candidates, 1, 1LL << 20);
  r.progress_probes = n.get_int("progress_probes", r.progress_probes, 0, 1LL << 20);
  if (n.has("schedules")) {
    r.schedules = parse_schedule_list(n.raw("schedules"), n.where("schedules"));
    for (const auto& s : r.schedules) require_runnable_schedule(s, c.model.n_layer, c.model.d_model, n.where("schedules"));
  }
  n.finish();
  return r;
}

// The grid a sweep section (of a sweep file the search file builds on) trains, as the sweep
// expands it: its schedule axes (and the baseline) and the number of seeds of its train.seed axis.
void read_sweep_grid(const YAML::Node& sweep, const ComposedConfig& composed, SearchPlan& plan) {
  const YAML::Node grid = sweep["grid"];
  const std::vector<GridAxis> axes = grid ? parse_grid(grid, *composed.origins, composed.source) : std::vector<GridAxis>{};
  const bool baseline = !sweep["baseline"] || sweep["baseline"].as<bool>();
  plan.grid = grid_schedules(axes, plan.config.model, composed.origins, baseline);
  plan.grid_seeds = 1;
  for (const auto& axis : axes)
    if (axis.key == "train.seed") plan.grid_seeds = axis.values.size();
  plan.grid_source = "the sweep section the search file builds on";
}

SearchPlan read_plan(const ComposedConfig& composed, const std::string& path, const std::vector<std::string>& overrides) {
  SearchPlan plan;
  plan.source = path;
  plan.overrides = overrides;
  YAML::Node root = YAML::Clone(composed.root);
  const YAML::Node search = root["search"];
  if (!search || !search.IsMap())
    throw Error("this file has no `search:` section", composed.source,
                "add `search: {method: spos, space: {heads: [1, 2, 4, 8]}}` (see experiments/search/), or train one "
                "config with prism train");
  root.remove("search");
  // A sweep file the search file builds on (defaults) brings its `sweep:` section: it names the grid this search
  // stands in for, and is no part of the run's config.
  const YAML::Node sweep = YAML::Clone(root["sweep"]);
  root.remove("sweep");
  const std::string source = overrides.empty() ? composed.source : composed.source + " (with overrides)";
  plan.config = parse_config(root, source, composed.origins);
  ConfigNode s(search, composed.source, "search", composed.origins);
  SearchSettings& st = plan.settings;
  st.name = s.get<std::string>("name", fs::path(path).stem().string());
  check_folder_name("search name", st.name, s.where("name"));
  const std::string method = s.get_choice("method", "spos", {"spos", "mixture"});
  st.method = method == "mixture" ? SearchMethod::Mixture : SearchMethod::SinglePath;
  st.seed = static_cast<uint64_t>(s.get_int("seed", static_cast<long long>(plan.config.train.seed), 0, 1LL << 62));
  plan.space = parse_space(s.child("space"), plan.config);
  st.space_text = plan.space.describe();
  st.mixture = parse_mixture(s.child("mixture"));
  st.rank = parse_rank(s.child("rank"), plan.config);
  st.rank.seed = st.seed;
  st.finetune = parse_finetune(s.child("finetune"));
  st.top = static_cast<int>(s.get_int("top", st.top, 1, 1000));
  const auto seeds = s.get<std::vector<int>>("seeds", {0});
  st.seeds.clear();
  for (int v : seeds) {
    if (v < 0) throw Error(fmt::format("seed {} is negative", v), s.where("seeds"), "use seeds >= 0");
    st.seeds.push_back(static_cast<uint64_t>(v));
  }
  if (st.seeds.empty()) throw Error("search.seeds is empty", s.where("seeds"), "give at least one seed, e.g. seeds: [0]");
  st.estimate = parse_estimate_section(s.child("estimate"));
  s.finish();
  // The grid this search stands in for.
  if (sweep && sweep.IsMap()) {
    read_sweep_grid(sweep, composed, plan);
  } else if (plan.space.is_list()) {
    plan.grid = plan.space.listed();
    plan.grid_source = "the listed schedules";
  } else {
    EnumerationSpace sp;
    sp.n_layer = plan.config.model.n_layer;
    sp.d_model = plan.config.model.d_model;
    sp.h_base = plan.config.model.n_head;
    sp.rules = plan.config.rules;
    sp.rules.strict = false;
    sp.rules.hard = true;
    plan.grid = enumerate_schedules(sp);
    plan.grid_source = "the progressive schedules the enumerator gives for this shape under the paper's rules";
  }
  if (st.method == SearchMethod::Mixture && plan.space.is_list() && plan.space.choices().size() < 2)
    throw Error("every listed schedule uses the same count in every layer: nothing to mix", s.where("space"), kSpaceFix);
  return plan;
}

}  // namespace

const char* method_name(SearchMethod m) { return m == SearchMethod::Mixture ? "mixture" : "spos"; }

std::string mixture_paths_text(const MixtureSettings& m, size_t choices) {
  const int n = mixture_paths(m, choices);
  return n < static_cast<int>(choices) ? fmt::format("{} of the {} counts per layer sampled per micro-batch", n, choices)
                                       : fmt::format("all {} counts per layer every step", choices);
}

SearchPlan plan_search(const std::string& path, const std::vector<std::string>& overrides) {
  const ComposedConfig composed = compose_config(path, overrides);
  SearchPlan plan = read_plan(composed, path, overrides);
  // The vocabulary follows the data (`vocab_size: auto`), as the trained model's does:
  // the cost figures and the grid's depend on it (the embedding and the logits).
  resolve_vocabulary(plan.config);
  YAML::Node root = YAML::Clone(composed.root);
  root["search"]["name"] = plan.settings.name;  // a resumed run keeps its name (search.yaml's stem is not it)
  // search.yaml records the number, as a run's config.yaml does, so that the file
  // costs the search the same wherever it is read (data.dir is relative to the cwd).
  // vocab_source says "from DIR" only where `auto` took the data's vocabulary.
  if (plan.config.vocab_source.rfind("from ", 0) == 0) root["model"]["vocab_size"] = plan.config.model.vocab_size;
  YAML::Emitter out;
  out << root;
  plan.file_text = out.c_str();
  return plan;
}

std::string search_config_yaml(const SearchPlan& plan) {
  return "# prism search: the resolved search file (written by prism; `prism search --resume DIR` reads it)\n" +
         plan.file_text + "\n";
}

SearchPlan plan_from_run(const std::string& run_dir, const std::vector<std::string>& overrides) {
  const std::string path = (fs::path(run_dir) / "search.yaml").string();
  if (!fs::exists(path))
    throw Error("no search.yaml in the run directory", run_dir, "pass the directory that prism search created (--out)");
  SearchPlan plan = plan_search(path, overrides);
  return plan;
}

}  // namespace prism
