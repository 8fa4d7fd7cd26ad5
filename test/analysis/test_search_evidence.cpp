// prism search --ground-truth (analysis/search_evidence.h) on a ground truth and three
// searches whose losses are written by hand, so that every figure it reports is
// known: the paired intervals and the top band, Kendall's tau of each search,
// whether each pick falls in the band, and the targets met or missed.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "prism/analysis/search_evidence.h"
#include "support.h"
#include "sweep/sweep_support.h"

using namespace prism;
using namespace prism::test;
namespace fs = std::filesystem;

namespace {

double number(const Cell& c) {
  if (const double* d = std::get_if<double>(&c)) return *d;
  if (const int64_t* i = std::get_if<int64_t>(&c)) return static_cast<double>(*i);
  return std::nan("");
}
std::string text(const Cell& c) {
  const std::string* s = std::get_if<std::string>(&c);
  return s ? *s : std::string();
}

}  // namespace

TEST_CASE("search evidence: top band, Kendall tau, picks in band and the targets from known losses",
          "[search][evidence]") {
  SweepFixture f;
  // A real sweep directory (its sweep.yaml prices one run); its summary is then replaced by known
  // final losses of 4 schedules x 3 seeds: A best; B within noise of A (paired differences +0.010,
  // -0.010, +0.003: its interval contains 0); C and D worse by exactly 0.05 and 0.20 on every seed.
  const std::string gt = f.dir.file("gt");
  auto sweep = run_prism(fmt::format(
      "sweep {} --out {} --jobs 1 --threads 1",
      f.sweep_file("gt.yaml", "sweep:\n  baseline: false\n  grid:\n    schedule.heads: [[2, 2, 4, 4]]\n", 2), gt));
  INFO(sweep.output);
  REQUIRE(sweep.exit_code == 0);
  const std::vector<std::pair<std::string, std::vector<double>>> truth = {
      {"[4, 4, 4, 4]", {5.00, 5.01, 5.02}},   // A
      {"[2, 2, 4, 4]", {5.01, 5.00, 5.023}},  // B
      {"[1, 1, 4, 4]", {5.05, 5.06, 5.07}},   // C
      {"[4, 4, 1, 1]", {5.20, 5.21, 5.22}},   // D (breaks rule 2)
  };
  std::string csv = "name,heads,seed,status,final_val_loss,tokens_all_rungs\n";
  for (const auto& [heads, losses] : truth)
    for (size_t s = 0; s < losses.size(); ++s)
      csv += fmt::format("x,\"{}\",{},completed,{},64\n", heads, s, losses[s]);
  csv += "y,\"[4, 4, 4, 4]\",3,failed,,64\n";  // not completed: left out
  write_file(gt + "/summary.csv", csv);

  // Three searches: their rankings (best first) and so their picks (the first row).
  const std::string head = "rank,schedule,heads,loss,loss_se,estimate,hard_rules,guidelines,why\n";
  auto search = [&](const std::string& name, int seed, const std::vector<std::string>& order) {
    const std::string dir = f.dir.file(name);
    fs::create_directories(dir);
    write_file(dir + "/search.yaml",
               tiny_base(f.shards, 2) + fmt::format("search: {{method: spos, space: {{heads: [1, 2, 4]}}, seed: {}}}\n", seed));
    std::string rows = head;
    for (size_t i = 0; i < order.size(); ++i)
      rows += fmt::format("{},x,{},{},0.01,{},{},,\n", i + 1, order[i], 4.0 + 0.1 * static_cast<double>(i),
                          4.5 + 0.1 * static_cast<double>(i), order[i] == "4 4 1 1" ? 0 : 1);
    write_file(dir + "/ranking.csv", rows);
    return dir;
  };
  // s1: B, A, D, C: 2 of 6 pairs discordant, tau 1/3; pick B (in the band).
  // s2: the ground truth's order, tau 1; pick A. s3: reversed, tau -1; pick D (not in the band).
  EvidenceOptions o;
  o.ground_truth = gt;
  o.searches = {search("s1", 1, {"2 2 4 4", "4 4 4 4", "4 4 1 1", "1 1 4 4"}),
                search("s2", 2, {"4 4 4 4", "2 2 4 4", "1 1 4 4", "4 4 1 1"}),
                search("s3", 3, {"4 4 1 1", "1 1 4 4", "2 2 4 4", "4 4 4 4"})};
  const Evidence e = evaluate_search(o);

  const Table& g = e.ground_truth;
  REQUIRE(g.rows.size() == 4);
  const std::vector<std::string> order{"4 4 4 4", "2 2 4 4", "1 1 4 4", "4 4 1 1"};
  const std::vector<int> band{1, 1, 0, 0};
  const std::vector<double> diff{0.0, 0.001, 0.05, 0.20};
  for (size_t i = 0; i < 4; ++i) {
    INFO(i);
    CHECK(text(g.rows[i][g.column("heads")]) == order[i]);
    CHECK(number(g.rows[i][g.column("seeds")]) == 3);
    CHECK(number(g.rows[i][g.column("diff_vs_best")]) == Approx(diff[i]).margin(1e-9));
    CHECK(number(g.rows[i][g.column("top_band")]) == band[i]);
  }
  // B's paired interval: mean 0.001, sd of (0.010, -0.010, 0.003), t(0.975, 2 df) = 4.302653.
  const double sd = std::sqrt((0.009 * 0.009 + 0.011 * 0.011 + 0.002 * 0.002) / 2);
  CHECK(number(g.rows[1][g.column("ci_hi")]) == Approx(0.001 + 4.302653 * sd / std::sqrt(3.0)).epsilon(1e-5));
  CHECK(number(g.rows[2][g.column("ci_lo")]) == Approx(0.05).margin(1e-9));  // no spread: a zero-width interval

  const Table& s = e.searches;
  REQUIRE(s.rows.size() == 3);
  const std::vector<double> tau{1.0 / 3.0, 1.0, -1.0};
  const std::vector<std::string> pick{"2x2,4x2", "4x4", "4x2,1x2"};
  const std::vector<int> in_band{1, 1, 0};
  for (size_t i = 0; i < 3; ++i) {
    INFO(i);
    CHECK(number(s.rows[i][s.column("kendall_tau")]) == Approx(tau[i]));
    CHECK(text(s.rows[i][s.column("pick")]) == pick[i]);
    CHECK(number(s.rows[i][s.column("pick_in_ground_truth")]) == 1);
    CHECK(number(s.rows[i][s.column("pick_in_top_band")]) == in_band[i]);
  }
  const Table& m = e.methods;
  REQUIRE(m.rows.size() == 1);
  CHECK(number(m.rows[0][m.column("tau_mean")]) == Approx(1.0 / 9.0));
  CHECK(number(m.rows[0][m.column("picks_in_band")]) == 2);
  CHECK_THAT(e.markdown, Catch::Contains("missed by 0.489") && Catch::Contains("2 of 3 picks in the top band: met"));
  {  // The targets come from the options (--target-*): the same numbers judged against others.
    EvidenceOptions strict = o;
    strict.targets.tau = 0.1;
    strict.targets.band = 1.0;
    strict.targets.share = 1e-6;
    strict.targets.spread = 7;
    const Evidence t = evaluate_search(strict);
    CHECK_THAT(t.markdown, Catch::Contains("| Kendall tau >= 0.1 | pick in the top band in >= 1 of 1 |") &&
                               Catch::Contains("over 3 searches: met") &&
                               Catch::Contains("2 of 3 picks in the top band: missed") && Catch::Contains("(needed: 7x)"));
    CHECK_THAT(t.markdown, !Catch::Contains("% of the grid: met"));
    strict.targets.band = 0.55;  // 2 of 3 is at least 55%; a share in no small fraction reads as a percentage
    CHECK_THAT(evaluate_search(strict).markdown,
               Catch::Contains("in >= 55% |") && Catch::Contains("2 of 3 picks in the top band: met"));
    strict.targets.band = 1.5;
    CHECK_THROWS_WITH(evaluate_search(strict), Catch::Contains("--target-band"));
  }
  // The searches' picks: s2's is the best; regrets B +0.001, A 0, D +0.20.
  CHECK(number(m.rows[0][m.column("picks_best")]) == 1);
  CHECK(number(m.rows[0][m.column("mean_regret")]) == Approx(0.201 / 3).epsilon(1e-9));
  // From-scratch baselines at the searches' budget (more than the 4 schedules: a budget of 3 seeds'
  // retraining plus the search). With 1 seed the grid trains all 4, judged on each of the 3 seeds:
  // seeds 0 and 2 pick A (the best), seed 1 picks B (in the band, +0.001): P(best) 2/3, regret
  // 0.001 / 3; tau of each seed's losses against the other two's mean as in the leave-one-out line below.
  const Table& b = e.baselines;
  REQUIRE(b.rows.size() == 2);  // k = 1 and 2 seeds per schedule; 3 would leave no seed held out
  CHECK(number(b.rows[0][b.column("budget_runs")]) == 4);  // the runs it trains
  CHECK_THAT(text(b.rows[0][b.column("baseline")]),
             Catch::Contains("grid of all 4 schedules x 1 seed (4 runs) at the budget of") && Catch::Contains("(spos)"));
  CHECK(number(b.rows[0][b.column("draws")]) == 3);
  CHECK(number(b.rows[0][b.column("p_pick_best")]) == Approx(2.0 / 3.0));
  CHECK(number(b.rows[0][b.column("pick_in_top_band")]) == 1);
  CHECK(number(b.rows[0][b.column("mean_regret")]) == Approx(0.001 / 3).epsilon(1e-6));
  CHECK(number(b.rows[0][b.column("tau_mean")]) == Approx((2.0 / 3 + 2.0 / 3 + 5 / std::sqrt(30.0)) / 3));
  CHECK(number(b.rows[0][b.column("tau_lo")]) == Approx(2.0 / 3));
  CHECK(number(b.rows[0][b.column("tau_hi")]) == Approx(5 / std::sqrt(30.0)));
  CHECK(number(b.rows[1][b.column("seeds_per_schedule")]) == 2);
  const int count = static_cast<int>(number(b.rows[1][b.column("schedules")]));  // every subset of them, every seed pair
  CHECK(number(b.rows[1][b.column("draws")]) == 3 * (count == 4 ? 1 : count == 3 ? 4 : 6));
  // The ground truth's own agreement, leave one seed out: seeds 0 and 1 each swap A and B against
  // the other two's mean (1 of 6 pairs discordant: tau 2/3); seed 2's A and B tie in the others'
  // mean (5.005 both): tau-b 5 / sqrt(5 x 6).
  CHECK_THAT(e.markdown, Catch::Contains("Kendall tau 0.749 on average (per seed: 0.667, 0.667, 0.913)"));

  // A search is costed with the vocabulary its run trained on (the config.yaml it wrote), not what
  // search.yaml's `vocab_size: auto` resolves to where the report runs.
  write_file(o.searches[1] + "/config.yaml", "model:\n  vocab_size: 99999\n");
  const Evidence v = evaluate_search(o);
  fs::remove(o.searches[1] + "/config.yaml");
  CHECK_THAT(v.markdown, Catch::Contains(o.searches[1] + ": one plain run of its config costs"));
  CHECK_THAT(e.markdown, !Catch::Contains("one plain run of its config costs"));
  const size_t share = s.column("search_share_of_grid");
  CHECK(number(v.searches.rows[1][share]) > 1.5 * number(s.rows[1][share]));
  CHECK(number(v.searches.rows[0][share]) == Approx(number(s.rows[0][share])));

  // A search whose fine-tuning ran (RUN/finetune/summary.csv) is judged by that ranking. s3's shared
  // ranking is reversed; its fine-tune, under halving, took B and A to the last rung (B best there)
  // and pruned C and D at the first, where C's loss was the lowest: the order B, A, C, D (1 of 6
  // pairs discordant: tau 2/3), the pick B (in the band). Its cost is what the sweep trained: 4000
  // tokens and 6 held-out evaluations of eval_tokens (64) at a third of a training token's FLOPs.
  fs::create_directories(o.searches[2] + "/finetune");
  write_file(o.searches[2] + "/finetune/summary.csv",
             "name,heads,seed,status,rung,steps,final_val_loss,tokens_all_rungs\n"
             "a,\"[4, 4, 4, 4]\",3,completed,1,6,4.70,1000\n"
             "b,\"[2, 2, 4, 4]\",3,completed,1,6,4.69,1000\n"
             "c,\"[1, 1, 4, 4]\",3,pruned,0,2,4.60,1000\n"
             "d,\"[4, 4, 1, 1]\",3,pruned,0,2,4.65,1000\n");
  const Evidence ft = evaluate_search(o);
  const Table& fs3 = ft.searches;
  CHECK(text(fs3.rows[2][fs3.column("method")]) == "spos + fine-tune (4 at 2, 2 at 6 steps)");
  CHECK(text(fs3.rows[2][fs3.column("ranking")]) == "fine-tuned: 4 x 2 steps, then the best 2 x 6 steps");
  CHECK(number(fs3.rows[2][fs3.column("kendall_tau")]) == Approx(2.0 / 3.0));
  CHECK(number(fs3.rows[2][fs3.column("kendall_tau_shared")]) == Approx(-1.0));
  CHECK(text(fs3.rows[2][fs3.column("pick")]) == "2x2,4x2");
  CHECK(number(fs3.rows[2][fs3.column("pick_in_top_band")]) == 1);
  const double grid_tokens = 4 * 3 * 64;  // 4 schedules x 3 seeds x (2 steps x 32 tokens)
  CHECK(number(fs3.rows[2][share]) - number(s.rows[2][share]) == Approx((4000 + 6 * 64 / 3.0) / grid_tokens));
  CHECK(number(fs3.rows[0][share]) == Approx(number(s.rows[0][share])));  // the others as before
  REQUIRE(ft.methods.rows.size() == 2);  // judged apart from the shared-weights searches
  CHECK_THAT(ft.markdown, Catch::Contains("| spos + fine-tune (4 at 2, 2 at 6 steps) | tau 0.667"));

  // The CLI writes the same tables: by default with the fine-tuned ranking, with --ranking shared without it.
  const std::string report = f.dir.file("report");
  const std::string cli = fmt::format("search --ground-truth {} --searches {} {} {} --report {}", gt, o.searches[0],
                                      o.searches[1], o.searches[2], report);
  auto r = run_prism(cli);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (const char* file : {"evidence.md", "ground_truth.csv", "searches.csv", "methods.csv", "baselines.csv"})
    CHECK(fs::exists(report + "/" + file));
  CHECK(read_file(report + "/evidence.md") == ft.markdown);
  r = run_prism(cli + " --ranking shared");
  REQUIRE(r.exit_code == 0);
  CHECK(read_file(report + "/evidence.md") == e.markdown);
  fs::remove_all(o.searches[2] + "/finetune");

  // When the best schedule breaks a hard rule, a decoded pick (which obeys rules 1-3) is also
  // judged against the best schedule the rules allow. D (decreasing: rule 2) now best, by 0.10 on every seed.
  csv = "name,heads,seed,status,final_val_loss,tokens_all_rungs\n";
  for (const auto& [heads, losses] : truth)
    for (size_t i = 0; i < losses.size(); ++i)
      csv += fmt::format("x,\"{}\",{},completed,{},64\n", heads, i,
                         heads == "[4, 4, 1, 1]" ? losses[i] - 0.30 : losses[i]);
  write_file(gt + "/summary.csv", csv);
  o.pick = "decoded";
  const Evidence d = evaluate_search(o);
  REQUIRE(text(d.ground_truth.rows[0][d.ground_truth.column("heads")]) == "4 4 1 1");
  // Decoded picks (the first row obeying rules 1-3): s1 B (within noise of A), s2 A, s3 C (A + 0.05).
  const std::vector<std::string> decoded{"2x2,4x2", "4x4", "1x2,4x2"};
  const std::vector<int> in_allowed{1, 1, 0};
  const std::vector<double> vs_allowed{0.001, 0.0, 0.05};
  for (size_t i = 0; i < 3; ++i) {
    INFO(i);
    CHECK(text(d.searches.rows[i][d.searches.column("pick")]) == decoded[i]);
    CHECK(number(d.searches.rows[i][d.searches.column("pick_in_top_band")]) == 0);  // none reaches D
    CHECK(number(d.searches.rows[i][d.searches.column("pick_diff_vs_best_allowed")]) == Approx(vs_allowed[i]).margin(1e-9));
    CHECK(number(d.searches.rows[i][d.searches.column("pick_in_allowed_band")]) == in_allowed[i]);
  }
  CHECK(number(d.methods.rows[0][d.methods.column("picks_in_allowed_band")]) == 2);
  CHECK_THAT(d.markdown, Catch::Contains("Rules 1-3 allow 3 of the 4 schedules; the best of them, 4x4, is +0.1000") &&
                             Catch::Contains("judged against the best schedule they allow (4x4)"));
}
