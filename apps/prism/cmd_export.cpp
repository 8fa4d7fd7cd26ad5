// prism export RUN.h5 | RUN_DIR | SWEEP_DIR ... --what ... --format csv|json: tidy tables.
#include <fmt/format.h>

#include <iostream>

#include "cli.h"
#include "prism/analysis/export.h"
#include "prism/error.h"
#include "prism/atomic_file.h"

namespace prism::cli {
namespace {

const char* kUsage =
    "PATH... --what loss|val|distance|position|delta|eval|summary [--format csv|json] [options]\n\n"
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
    "  summary   status, steps, tokens, final/best losses, time, eval accuracies, summary.csv columns\n\n"
    "examples:\n"
    "  prism export runs/prism --what loss > loss.csv\n"
    "  prism export sweeps/cpu --what summary --format json --out summary.json\n"
    "  prism export runs/prism --what delta --baseline runs/uniform";

int run(const std::vector<std::string>& args) {
  return guarded("export", [&]() -> int {
    po::options_description o("Options");
    o.add_options()
        ("path", po::value<std::vector<std::string>>()->multitoken(), "run.h5, run directory or sweep directory")
        ("what,w", po::value<std::string>(), "loss | val | distance | position | delta | eval | summary")
        ("format,f", po::value<std::string>()->default_value("csv"), "csv | json")
        ("out,o", po::value<std::string>(), "output file (default: stdout)")
        ("baseline", po::value<std::vector<std::string>>()->multitoken(), "delta: the uniform baseline run(s)")
        ("confidence", po::value<double>()->default_value(0.95), "delta: confidence level of the intervals");
    po::positional_options_description pos;
    pos.add("path", -1);
    po::variables_map vm;
    if (!parse("export", kUsage, o, pos, args, vm)) return 0;
    if (!vm.count("path")) throw Error("nothing to export", "prism export", "pass a run.h5, run directory or sweep directory");
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

const Registration reg{{70, "export", "tidy CSV/JSON tables of runs and sweeps (loss, distance, delta, eval, ...)", run}};

}  // namespace
}  // namespace prism::cli
