// prism export RUN.h5 | RUN_DIR | SWEEP_DIR ... --what ... --format csv|json: tidy tables.
// prism export RUN --hf DIR: the model as a Hugging Face transformers directory.
// prism export RUN|SWEEP --tensorboard DIR [--follow]: runs as TensorBoard event files.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "cli.h"
#include "prism/analysis/export.h"
#include "prism/data/tokenizer.h"
#include "prism/error.h"
#include "prism/atomic_file.h"
#include "prism/export/hf_export.h"
#include "prism/export/tensorboard.h"
#include "prism/store/safetensors.h"
#include "support_paths.h"

namespace prism::cli {
namespace {

const char* kUsage =
    "PATH... --what loss|val|distance|position|delta|eval|summary|loss_by_position [--format csv|json] [options]\n"
    "RUN --hf DIR [--hf-format prism|gpt2] [--vocab FILE] [--force]\n"
    "       prism export PATH... --tensorboard DIR [--follow] [--force]\n\n"
    "Writes one tidy table (a row per observation, named columns; pandas.read_csv /\n"
    "read_json(orient=\"records\") and R read it directly) to stdout or --out. PATH: a run.h5,\n"
    "a run directory, or a sweep directory (its summary.csv rows, or every run.h5 below it).\n"
    "Every table starts with run, heads and (but for delta, which pools seeds) seed.\n"
    "  loss      step, tokens, loss, lr, grad_norm, time_s      (training curve)\n"
    "  val       step, tokens, loss                             (validation curve)\n"
    "  distance  source (train | heldout), step, layer, layer_heads, head, distance\n"
    "  position  step, layer, layer_heads, head, bin, position_lo, position_hi, distance\n"
    "  delta     Delta D_l per layer with intervals over batches and seeds: against --baseline\n"
    "            runs, else each sweep schedule against its uniform runs, else the run's stored\n"
    "            /attention/delta (prism distance --baseline)\n"
    "  eval      task, acc, acc_norm, n, acc_stderr, acc_norm_stderr\n"
    "  summary   status, steps, tokens, final/best losses, time, eval accuracies, summary.csv columns\n"
    "  loss_by_position  context, trained_context, position, step, bucket, position_lo, position_hi,\n"
    "            loss, loss_se, batches, dtype  (each /val/by_position/T<context>: prism eval --position-loss)\n\n"
    "--hf DIR writes RUN's newest checkpoint (or the checkpoint directory / model.safetensors\n"
    "given) as a Hugging Face model: config.json (one head count per layer), model.safetensors,\n"
    "the tokenizer files of the run's vocabulary (--vocab overrides it; default GPT-2's) and,\n"
    "for --hf-format prism, modeling_prism.py + configuration_prism.py (load with\n"
    "trust_remote_code=True; output_attentions gives each layer's attention probabilities).\n"
    "--hf-format gpt2 writes a uniform model as a stock GPT2LMHeadModel, no remote code.\n"
    "lm-evaluation-harness then runs any task on DIR (docs/export.md).\n\n"
    "--tensorboard DIR writes each run (every trial of a sweep) as TensorBoard event files in\n"
    "DIR/<run>: train/loss, train/lr, train/grad_norm, train/tokens_per_s per logged step;\n"
    "val/loss and val/loss_se; distance/layer_NN (D_l); the schedule and config as text; and\n"
    "one HParams row per run (schedule, heads, seed, grid values; last val/loss). Written with\n"
    "the tensorboard package's writer (scripts/tensorboard_bridge.py). --follow keeps\n"
    "mirroring while runs train (and a sweep's new trials) until all have finished, or Ctrl-C.\n"
    "Then: tensorboard --logdir DIR\n\n"
    "examples:\n"
    "  prism export runs/prism --what loss > loss.csv\n"
    "  prism export sweeps/cpu --what summary --format json --out summary.json\n"
    "  prism export runs/prism --what delta --baseline runs/uniform\n"
    "  prism export runs/prism --hf hf/prism\n"
    "  prism export runs/uniform --hf hf/uniform --hf-format gpt2\n"
    "  prism export sweeps/cpu-quick --tensorboard tb/cpu-quick\n"
    "  prism export runs/prism --tensorboard tb --follow      (while it trains)";

// The vocabulary of an --hf export: --vocab, else the one the run names, else GPT-2's
// ($PRISM_VOCAB, ./data/cache/gpt2.tiktoken, or the source tree's copy).
std::pair<std::string, std::string> hf_vocabulary(const po::variables_map& vm, const LoadedModel& lm) {
  if (vm.count("vocab")) return {vm["vocab"].as<std::string>(), "--vocab"};
  if (auto named = run_vocabulary(lm)) return {*named, "named by the run"};
  std::string p = default_vocab_path();
  if (!std::getenv("PRISM_VOCAB") && !std::filesystem::exists(p)) p = reference_source_dir() + "/data/cache/gpt2.tiktoken";
  return {p, "GPT-2's, the default; --vocab FILE for another"};
}

int export_hf_dir(const po::variables_map& vm, const std::vector<std::string>& paths) {
  if (paths.size() != 1)
    throw Error(fmt::format("--hf exports one model, {} paths given", paths.size()), "prism export --hf",
                "pass one run directory, checkpoint directory or model.safetensors");
  if (vm.count("what")) throw Error("--what and --hf do not go together", "prism export", "export tables and models in two calls");
  LoadedModel lm = load_model(paths[0]);
  HfExportOptions o;
  o.format = parse_hf_format(vm["hf-format"].as<std::string>());
  o.force = vm["force"].as<bool>();
  const auto [vocab, why] = hf_vocabulary(vm, lm);
  o.vocab = vocab;
  const HfExportSummary s = export_hf(lm, vm["hf"].as<std::string>(), o);
  const bool prism = s.format == HfFormat::Prism;
  std::cout << fmt::format("{} (step {}, heads [{}], {} parameters) -> {} ({})\n", lm.path, lm.step,
                           fmt::join(lm.config.schedule.heads(), ","), s.parameters, s.dir,
                           prism ? "PrismForCausalLM, trust_remote_code=True" : "GPT2LMHeadModel")
            << fmt::format("tokenizer: {} ({}): {} ids, {} merges{}\n", s.vocab, why, s.tokenizer_ids, s.merges,
                           s.unmerged ? fmt::format(", {} tokens without a merge", s.unmerged) : "")
            << fmt::format("files: {}\n", fmt::join(s.files, ", "))
            << fmt::format("load: AutoModelForCausalLM.from_pretrained(\"{}\"{})\n", s.dir,
                           prism ? ", trust_remote_code=True" : "");
  return 0;
}

int export_tensorboard_dir(const po::variables_map& vm, const std::vector<std::string>& paths) {
  if (vm.count("what") || vm.count("hf"))
    throw Error("--tensorboard goes alone", "prism export", "export tables, models and TensorBoard files in separate calls");
  TensorBoardOptions o;
  o.python = vm["python"].as<std::string>();
  o.bridge = reference_source_dir() + "/scripts/tensorboard_bridge.py";
  o.follow = vm["follow"].as<bool>();
  o.poll_s = vm["poll"].as<double>();
  o.force = vm["force"].as<bool>();
  o.log = [](const std::string& line) { std::cerr << line << std::endl; };
  const std::string dir = vm["tensorboard"].as<std::string>();
  if (o.follow) std::cerr << fmt::format("mirroring into {} every {:g} s until the runs finish (Ctrl-C stops)\n", dir, o.poll_s);
  const TensorBoardSummary s = export_tensorboard(paths, dir, o);
  std::cout << fmt::format("{} run(s) -> {} ({} events, tensorboard {}): {}\n", s.runs.size(), s.dir, s.events,
                           s.tensorboard_version, fmt::join(s.runs, ", "))
            << fmt::format("view: tensorboard --logdir {}\n", s.dir);
  return 0;
}

int run(const std::vector<std::string>& args) {
  return guarded("export", [&]() -> int {
    po::options_description o("Options");
    o.add_options()
        ("path", po::value<std::vector<std::string>>()->multitoken(), "run.h5, run directory or sweep directory")
        ("what,w", po::value<std::string>(), "loss | val | distance | position | delta | eval | summary")
        ("format,f", po::value<std::string>()->default_value("csv"), "csv | json")
        ("out,o", po::value<std::string>(), "output file (default: stdout)")
        ("baseline", po::value<std::vector<std::string>>()->multitoken(), "delta: the uniform baseline run(s)")
        ("confidence", po::value<double>()->default_value(0.95), "delta: confidence level of the intervals")
        ("hf", po::value<std::string>(), "write the model as a Hugging Face directory DIR")
        ("hf-format", po::value<std::string>()->default_value("prism"), "--hf: prism (any schedule) | gpt2 (uniform only)")
        ("vocab", po::value<std::string>(), "--hf: the run's tiktoken ranks file (default: the run's, else GPT-2's)")
        ("force", po::bool_switch(), "--hf: replace an existing DIR; --tensorboard: replace these runs in DIR")
        ("tensorboard", po::value<std::string>(), "write the runs as TensorBoard event files under DIR")
        ("follow", po::bool_switch(), "--tensorboard: keep mirroring while the runs train")
        ("poll", po::value<double>()->default_value(10.0), "--follow: seconds between reads of the runs")
        ("python", po::value<std::string>()->default_value(reference_python()), "--tensorboard: a Python with tensorboard");
    po::positional_options_description pos;
    pos.add("path", -1);
    po::variables_map vm;
    if (!parse("export", kUsage, o, pos, args, vm)) return 0;
    if (!vm.count("path")) throw Error("nothing to export", "prism export", "pass a run.h5, run directory or sweep directory");
    if (vm.count("tensorboard")) return export_tensorboard_dir(vm, vm["path"].as<std::vector<std::string>>());
    if (vm["follow"].as<bool>()) throw Error("--follow belongs to --tensorboard", "prism export", "add --tensorboard DIR");
    if (vm.count("hf")) return export_hf_dir(vm, vm["path"].as<std::vector<std::string>>());
    if (!vm["hf-format"].defaulted() || vm.count("vocab") || vm["force"].as<bool>())
      throw Error("--hf-format, --vocab and --force belong to --hf or --tensorboard", "prism export",
                  "add --hf DIR, or drop them");
    if (!vm.count("what"))
      throw Error("no table chosen", "--what", fmt::format("pass --what {}", fmt::join(export_what_names(), "|")));
    const std::string format = vm["format"].as<std::string>();
    if (format != "csv" && format != "json") throw Error(fmt::format("unknown format '{}'", format), "--format", "use csv or json");
    ExportOptions eo;
    if (vm.count("baseline")) eo.baseline = vm["baseline"].as<std::vector<std::string>>();
    eo.confidence = vm["confidence"].as<double>();
    const ExportWhat what = parse_export_what(vm["what"].as<std::string>());
    Table table = export_table(find_runs(vm["path"].as<std::vector<std::string>>()), what, eo);
    for (const auto& note : table.notes) std::cerr << "note: " << note << "\n";
    const std::string text = format == "csv" ? to_csv(table) : to_json(table);
    if (vm.count("out")) {
      write_file_atomic(vm["out"].as<std::string>(), text);
      std::cerr << fmt::format("{} rows -> {}\n", table.rows.size(), vm["out"].as<std::string>());
    } else {
      std::cout << text;
    }
    return 0;
  });
}

const Registration reg{{70, "export",
                        "tidy CSV/JSON tables of runs and sweeps; a model as a Hugging Face directory (--hf); runs for "
                        "TensorBoard (--tensorboard)",
                        run}};

}  // namespace
}  // namespace prism::cli
