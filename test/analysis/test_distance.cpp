// Attention distance: the back ends against the definition, the measured
// profile against a direct computation, its run.h5 round trip, and Delta D_l.
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "prism/analysis/distance_delta.h"
#include "prism/analysis/measure_distance.h"
#include "prism/data/shard.h"
#include "prism/error.h"
#include "prism/store/run_reader.h"
#include "prism/store/run_store.h"
#include "support.h"

using namespace prism;
using prism::test::TempDir;

namespace {

// A test-tiny model (heads [2, 4]) whose attention is far from uniform: the
// query/key projections are scaled up so the softmax is peaked.
GPT sharp_model(uint64_t seed, attention::Backend backend = attention::Backend::Auto) {
  torch::manual_seed(seed);
  ModelConfig cfg = model_preset("test-tiny");
  cfg.block_size = 48;
  GPT m(cfg, HeadSchedule({2, 4}), backend);
  torch::NoGradGuard ng;
  for (size_t l = 0; l < m->h->size(); ++l) m->h[l]->as<Block>()->attn->c_attn->weight.mul_(12.0);
  m->eval();
  return m;
}

TokenLoader held_out(const std::string& dir, int64_t batch, int64_t T, uint64_t seed = 7) {
  std::vector<uint16_t> tokens(6000);
  std::mt19937 rng(seed);
  for (auto& t : tokens) t = static_cast<uint16_t>(rng() % 512);
  write_shard(dir + "/x_val_000000.bin", tokens);
  LoaderOptions lo;
  lo.shards = {dir + "/x_val_000000.bin"};
  lo.batch = batch;
  lo.seq_len = T;
  lo.shuffle = false;
  return TokenLoader(lo);
}

double max_abs_diff(const std::vector<std::vector<std::vector<double>>>& a,
                    const std::vector<std::vector<std::vector<double>>>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].size() == b[i].size());
    for (size_t j = 0; j < a[i].size(); ++j) {
      REQUIRE(a[i][j].size() == b[i][j].size());
      for (size_t k = 0; k < a[i][j].size(); ++k) m = std::max(m, std::abs(a[i][j][k] - b[i][j][k]));
    }
  }
  return m;
}

}  // namespace

TEST_CASE("distance: the reference back end computes sum_j p_ij (i - j) of the explicit softmax", "[analysis][distance]") {
  torch::manual_seed(3);
  const int64_t B = 2, T = 11, H = 3, D = 8;
  auto q = torch::randn({B, T, H, D}) * 2, k = torch::randn({B, T, H, D}) * 2, v = torch::randn({B, T, H, D});
  attention::Options o;
  o.backend = attention::Backend::Reference;
  o.want_distance = true;
  auto d = attention::causal_attention(q, k, v, o).distance;  // (B, H, T)
  REQUIRE(d.sizes() == torch::IntArrayRef({B, H, T}));
  auto qd = q.to(torch::kDouble), kd = k.to(torch::kDouble);
  double worst = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        // Plain loops: scores over j <= i, softmax, then the expected offset.
        std::vector<double> s;
        double mx = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          s.push_back((qd[b][i][h] * kd[b][j][h]).sum().item<double>() / std::sqrt(double(D)));
          mx = std::max(mx, s.back());
        }
        double z = 0, acc = 0;
        for (int64_t j = 0; j <= i; ++j) z += std::exp(s[size_t(j)] - mx);
        for (int64_t j = 0; j <= i; ++j) acc += std::exp(s[size_t(j)] - mx) / z * double(i - j);
        worst = std::max(worst, std::abs(acc - d[b][h][i].item<double>()));
      }
  CHECK(worst < 1e-4);
  CHECK(d.select(2, 0).abs().max().item<double>() == 0.0);  // query 0 sees only itself
}

TEST_CASE("distance: the measurement is the model's own distance-only forward pass", "[analysis][distance]") {
  TempDir dir("prism-distance");
  GPT m = sharp_model(1);
  TokenLoader loader = held_out(dir.path(), 3, 40);
  MeasureOptions mo;
  mo.batches = 1;
  DistanceProfile p = measure_distance(m, loader, mo);
  torch::NoGradGuard ng;
  ForwardOptions with_distance;
  with_distance.want_distance = true;
  auto full = m->forward(held_out(dir.path(), 3, 40).next().first, {}, with_distance).distance;
  REQUIRE(p.by_batch.size() == 1);
  REQUIRE(full.size() == p.by_batch[0].size());
  for (size_t l = 0; l < full.size(); ++l) {
    auto mean = full[l].to(torch::kDouble).mean({0, 2});
    for (int64_t k = 0; k < mean.size(0); ++k) CHECK(p.by_batch[0][l][size_t(k)] == mean[k].item<double>());
  }
  CHECK(p.backend == backends_label(m->resolved_backends(40, ForwardOptions::distance_only())));
}

TEST_CASE("distance: fused telemetry and explicit probabilities give the same profile", "[analysis][distance]") {
  // auto picks the fused CPU kernel (distance carried through the online softmax)
  // where the build has it; reference computes it from explicit probabilities.
  TempDir dir("prism-distance");
  GPT m = sharp_model(2);
  auto profile = [&](attention::Backend backend) {
    TokenLoader loader = held_out(dir.path(), 4, 48);
    MeasureOptions mo;
    mo.backend = backend;
    mo.batches = 3;
    mo.bins = 6;
    return measure_distance(m, loader, mo);
  };
  DistanceProfile ref = profile(attention::Backend::Reference);
  DistanceProfile fast = profile(attention::Backend::Auto);
  CHECK(ref.backend == "reference");
  WARN("attention back end 'auto' resolves to '" << fast.backend << "' in this build"
       << (fast.backend == "reference" ? " (the same code path: this check bites once a fused back end is built)" : ""));
  CHECK(max_abs_diff(ref.by_batch, fast.by_batch) < 1e-4);
  CHECK(max_abs_diff(ref.by_position, fast.by_position) < 1e-4);
  // Peaked attention: per query far from uniform attention's i / 2.
  torch::NoGradGuard ng;
  auto d = m->forward(held_out(dir.path(), 1, 48).next().first, {}, ForwardOptions::distance_only()).distance;
  CHECK((d[1][0] - torch::arange(48) / 2.0).abs().max().item<double>() > 5.0);
}

TEST_CASE("distance: measured profile equals per-batch, per-head and per-bin means computed directly", "[analysis][distance]") {
  TempDir dir("prism-distance");
  GPT m = sharp_model(4, attention::Backend::Reference);  // the model's own back end, as attention.backend sets it
  TokenLoader loader = held_out(dir.path(), 2, 30);
  MeasureOptions mo;
  mo.batches = 4;
  mo.bins = 4;  // query positions [0,7) [7,15) [15,22) [22,30)
  DistanceProfile p = measure_distance(m, loader, mo);
  CHECK(p.bin_edges == std::vector<int64_t>{0, 7, 15, 22, 30});
  REQUIRE(p.batches() == 4);
  CHECK(p.tokens() == 4 * 2 * 30);
  REQUIRE(p.normalized_by_batch.size() == 4);
  // The same windows again, aggregated by plain loops.
  TokenLoader again = held_out(dir.path(), 2, 30);
  std::vector<std::vector<std::vector<double>>> sums(2);  // [layer][head][bin]
  for (int l = 0; l < 2; ++l) sums[size_t(l)].assign(size_t(p.heads[size_t(l)]), std::vector<double>(4, 0.0));
  for (int64_t b = 0; b < 4; ++b) {
    torch::NoGradGuard ng;
    ForwardOptions with_distance;
    with_distance.want_distance = true;
    auto d = m->forward(again.next().first, {}, with_distance).distance;
    for (size_t l = 0; l < 2; ++l)
      for (int64_t k = 0; k < d[l].size(1); ++k) {
        CHECK(p.by_batch[size_t(b)][l][size_t(k)] ==
              Approx(d[l].select(1, k).to(torch::kDouble).mean().item<double>()).epsilon(1e-9));
        // d / i over the queries i >= 1 of both sequences: 2 x 29 values.
        double norm = 0;
        for (int64_t s = 0; s < 2; ++s)
          for (int64_t i = 1; i < 30; ++i) norm += d[l][s][k][i].item<double>() / double(i);
        CHECK(p.normalized_by_batch[size_t(b)][l][size_t(k)] == Approx(norm / (2 * 29)).epsilon(1e-9));
        for (int64_t s = 0; s < 2; ++s)
          for (int64_t i = 0; i < 30; ++i) {
            size_t bin = i < 7 ? 0 : i < 15 ? 1 : i < 22 ? 2 : 3;
            sums[l][size_t(k)][bin] += d[l][s][k][i].item<double>();
          }
      }
  }
  const double width[4] = {7, 8, 7, 8};
  for (size_t l = 0; l < 2; ++l)
    for (size_t k = 0; k < sums[l].size(); ++k)
      for (size_t bin = 0; bin < 4; ++bin)
        CHECK(p.by_position[l][k][bin] == Approx(sums[l][k][bin] / (4 * 2 * width[bin])).epsilon(1e-9));
  // Distances grow with the query position: the last bin exceeds the first in every layer.
  auto pos = p.layer_by_position();
  for (const auto& layer : pos) CHECK(layer.back() > layer.front());
  // d / i is a share of the prefix: between 0 (the query itself) and 1 (the first token).
  for (double v : p.layer_mean_normalized()) {
    CHECK(v > 0);
    CHECK(v < 1);
  }
}

TEST_CASE("distance: a profile round-trips through run.h5 /attention/heldout", "[analysis][distance][store]") {
  TempDir dir("prism-distance");
  GPT m = sharp_model(5);
  TokenLoader loader = held_out(dir.path(), 2, 24);
  MeasureOptions mo;
  mo.batches = 3;
  DistanceProfile p = measure_distance(m, loader, mo);
  p.checkpoint = "ckpt/model.safetensors";
  p.step = 42;
  p.data = "x_val_000000.bin";
  p.tokens_id = "x|3x2x24";
  const std::string h5 = dir.file("run.h5");
  {
    RunStore store = RunStore::create(h5, RunAttributes{"model: {}", {2, 4}, 0, "test"});
    store.write_group("attention/heldout", to_result_group(p));
    // Written again: the new group replaces the old one whole.
    store.write_group("attention/heldout", to_result_group(p));
    CHECK_THROWS_AS(store.write_group("train/loss", to_result_group(p)), Error);
    CHECK_THROWS_AS(store.write_group("attention/layer_00", to_result_group(p)), Error);
    store.set_status("completed");
  }
  RunReader r(h5);
  DistanceProfile back = read_profile(r, false);
  CHECK(back.heads == p.heads);
  CHECK(back.step == 42);
  CHECK(back.tokens_id == p.tokens_id);
  CHECK(back.bin_edges == p.bin_edges);
  CHECK(max_abs_diff(back.by_batch, p.by_batch) == 0.0);
  CHECK(max_abs_diff(back.by_position, p.by_position) == 0.0);
  CHECK(back.layer_mean() == p.layer_mean());
  CHECK(max_abs_diff(back.normalized_by_batch, p.normalized_by_batch) == 0.0);
  ResultGroup g = r.read_group("attention/heldout");
  CHECK(g.reals("distance", h5) == p.layer_mean());  // D_l stored for h5py readers too
  CHECK(g.reals("distance_normalized", h5) == p.layer_mean_normalized());
  // A profile written before d / i existed reads back without it.
  ResultGroup old = g;
  for (auto it = old.arrays.begin(); it != old.arrays.end();)
    it = it->first.find("normalized") != std::string::npos ? old.arrays.erase(it) : std::next(it);
  DistanceProfile older = profile_from_group(old, p.heads, "old");
  CHECK_FALSE(older.has_normalized());
  CHECK(std::isnan(older.layer_mean_normalized()[0]));
  CHECK(older.layer_mean() == p.layer_mean());
  CHECK_FALSE(r.has_group("attention/heldout.partial"));
  CHECK_FALSE(r.has_group("attention/delta"));
}

TEST_CASE("distance: a run with no distance data is a clear error", "[analysis][distance][store]") {
  TempDir dir("prism-distance");
  const std::string h5 = dir.file("run.h5");
  RunStore::create(h5, RunAttributes{"model: {}", {2, 4}, 0, "test"}).close();
  RunReader r(h5);
  try {
    read_profile(r, true);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("no attention-distance data") && Catch::Contains("prism distance"));
  }
}

namespace {

// A profile with given per-batch layer means (every head of a layer equal).
DistanceProfile synthetic(const std::vector<int>& heads, const std::vector<std::vector<double>>& batch_layer,
                          const std::string& name, const std::string& tokens = "same") {
  DistanceProfile p;
  p.heads = heads;
  p.source = name;
  p.tokens_id = tokens;
  p.batch = 1;
  p.seq_len = 8;
  p.bin_edges = {0, 4, 8};
  for (const auto& row : batch_layer) {
    std::vector<std::vector<double>> layers;
    for (size_t l = 0; l < heads.size(); ++l) layers.emplace_back(size_t(heads[l]), row[l]);
    p.by_batch.push_back(layers);
  }
  for (size_t l = 0; l < heads.size(); ++l)
    p.by_position.emplace_back(size_t(heads[l]), std::vector<double>{batch_layer[0][l], 2 * batch_layer[0][l]});
  return p;
}

}  // namespace

TEST_CASE("Delta D_l: paired batch interval and Welch interval over seeds", "[analysis][delta]") {
  // Layer 0: Prism 2,4,6 vs baseline 1,2,3 per batch -> differences 1,2,3: mean 2, sd 1,
  // interval 2 +- t_{0.975,2} / sqrt(3) = 2 +- 4.3026527 / 1.7320508.
  auto p = synthetic({1, 2}, {{2, 5}, {4, 5}, {6, 5}}, "p");
  auto u = synthetic({2, 2}, {{1, 5}, {2, 5}, {3, 5}}, "u");
  DistanceDelta d = distance_delta({p}, {u}, 0.95);
  REQUIRE(d.rows.size() == 2);
  CHECK(d.rows[0].delta == Approx(2.0));
  CHECK(d.rows[0].prism == Approx(4.0));
  CHECK(d.rows[0].baseline == Approx(2.0));
  CHECK(d.rows[0].batch_ci.lo == Approx(2 - 4.3026527 / std::sqrt(3.0)).epsilon(1e-7));
  CHECK(d.rows[0].batch_ci.hi == Approx(2 + 4.3026527 / std::sqrt(3.0)).epsilon(1e-7));
  CHECK(d.rows[1].delta == Approx(0.0));
  CHECK(std::isnan(d.rows[0].seed_ci.lo));  // one run per side: no seed interval
  CHECK(d.rows[0].heads == 1);
  CHECK(d.rows[0].baseline_heads == 2);
  CHECK(d.by_position[0] == std::vector<double>{1.0, 2.0});  // batch 0's bins: (2 - 1), (4 - 2)

  // Two seeds per side: D_0 per run 4 and 6 (Prism) vs 2 and 2.5 (baseline).
  auto p2 = synthetic({1, 2}, {{5, 5}, {6, 5}, {7, 5}}, "p2");
  auto u2 = synthetic({2, 2}, {{2, 5}, {2.5, 5}, {3, 5}}, "u2");
  DistanceDelta s = distance_delta({p, p2}, {u, u2}, 0.95);
  CHECK(s.rows[0].delta == Approx(5.0 - 2.25));
  Interval w = welch_interval({4, 6}, {2, 2.5}, 0.95);
  CHECK(s.rows[0].seed_ci.lo == Approx(w.lo));
  CHECK(s.rows[0].seed_ci.hi == Approx(w.hi));
  CHECK(s.rows[0].seed_ci.lo < s.rows[0].delta);
  CHECK(s.rows[0].seed_ci.hi > s.rows[0].delta);
  CHECK(s.seed_method == "welch");  // no seeds known: unpaired
  CHECK(std::isfinite(s.rows[0].seed_p));

  // With seeds the runs pair up: per seed 4 - 2 and 6 - 2.5, a t-interval of {2, 3.5}
  // (narrower than Welch's here: the seed's shared effect drops out), and its t-test.
  p.seed = u.seed = 0;
  p2.seed = u2.seed = 1;
  DistanceDelta ps = distance_delta({p, p2}, {u2, u}, 0.95);  // the order of the runs does not matter
  CHECK(ps.seed_method == "paired");
  CHECK(ps.seed_pairs == 2);
  Interval paired = mean_interval({2.0, 3.5}, 0.95);
  CHECK(ps.rows[0].seed_ci.lo == Approx(paired.lo));
  CHECK(ps.rows[0].seed_ci.hi == Approx(paired.hi));
  CHECK(ps.rows[0].seed_p == Approx(mean_p_value({2.0, 3.5})));
  CHECK(ps.rows[0].delta == s.rows[0].delta);
  DistanceDelta ps_back = delta_from_group(to_result_group(ps), "test");
  CHECK(ps_back.seed_method == "paired");
  CHECK(ps_back.seed_pairs == 2);
  CHECK(ps_back.rows[0].seed_p == ps.rows[0].seed_p);
  // A seed twice on a side cannot pair: Welch again.
  p2.seed = 0;
  CHECK(distance_delta({p, p2}, {u, u2}, 0.95).seed_method == "welch");
  p2.seed = 1;

  // Without d / i on every side the normalised columns are NaN; with it, the same arithmetic.
  CHECK(std::isnan(s.rows[0].delta_normalized));
  for (auto* x : {&p, &p2, &u, &u2}) x->normalized_by_batch = x->by_batch;
  for (auto& b : p.normalized_by_batch) b[0][0] /= 10;  // Prism's layer 0 normalised: 0.2, 0.4, 0.6
  DistanceDelta n = distance_delta({p}, {u}, 0.95);
  CHECK(n.rows[0].prism_normalized == Approx(0.4));
  CHECK(n.rows[0].delta_normalized == Approx(0.4 - 2.0));
  CHECK(n.rows[1].delta_normalized == Approx(0.0));
  CHECK(std::isfinite(n.rows[0].batch_ci_normalized.lo));
  CHECK(delta_from_group(to_result_group(n), "test").rows[0].delta_normalized == n.rows[0].delta_normalized);

  // The /attention/delta layout round-trips.
  DistanceDelta back = delta_from_group(to_result_group(s), "test");
  CHECK(back.rows[0].delta == s.rows[0].delta);
  CHECK(back.rows[0].seed_ci.hi == s.rows[0].seed_ci.hi);
  CHECK(back.prism_runs == std::vector<std::string>{"p", "p2"});
  CHECK(back.by_position == s.by_position);
}

TEST_CASE("Delta D_l: refuses runs measured on other tokens, other depths or mixed schedules", "[analysis][delta]") {
  auto p = synthetic({1, 2}, {{2, 5}, {4, 5}}, "p");
  auto u = synthetic({2, 2}, {{1, 5}, {2, 5}}, "u");
  auto other = synthetic({2, 2}, {{1, 5}, {2, 5}}, "other", "different tokens");
  auto deep = synthetic({2, 2, 2}, {{1, 5, 5}, {2, 5, 5}}, "deep");
  auto mixed = synthetic({2, 2}, {{2, 5}, {4, 5}}, "mixed");
  CHECK_THROWS_WITH(distance_delta({p}, {other}, 0.95), Catch::Contains("other tokens") && Catch::Contains("--data"));
  CHECK_THROWS_WITH(distance_delta({p}, {deep}, 0.95), Catch::Contains("layers"));
  CHECK_THROWS_WITH(distance_delta({p, mixed}, {u}, 0.95), Catch::Contains("different schedules"));
  CHECK_THROWS_WITH(distance_delta({}, {u}, 0.95), Catch::Contains("at least one run"));
}
