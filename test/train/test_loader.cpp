// TokenLoader: windows are real slices of the shards, the order is a function
// of (seed, epoch, position) only, state()/restore() resumes exactly, ranks read
// disjoint windows whose union is the single-process batch, and bad shards are
// errors naming the shard.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <set>

#include "data/data_support.h"
#include "prism/train/loader.h"
#include "prism/data/shard.h"
#include "prism/error.h"

using namespace prism;
using namespace prism::test;

namespace {

constexpr int64_t kStride = 20000;  // token value = shard * kStride + position: every token says where it is from

// Shards of the given sizes in llm.c's naming (shard 0 = val), in `dir`.
std::vector<std::string> make_shards(const TempDir& dir, const std::vector<size_t>& sizes, const std::string& name = "t") {
  std::vector<std::string> paths;
  for (size_t s = 0; s < sizes.size(); ++s) {
    std::vector<uint16_t> toks(sizes[s]);
    for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<uint16_t>(s * kStride + i);
    paths.push_back(dir.file(fmt::format("{}_{}_{:06d}.bin", name, s == 0 ? "val" : "train", s)));
    write_shard(paths.back(), toks);
  }
  return paths;
}

LoaderOptions options(std::vector<std::string> shards, int64_t B, int64_t T, bool shuffle = true, uint64_t seed = 7) {
  LoaderOptions o;
  o.shards = std::move(shards);
  o.batch = B;
  o.seq_len = T;
  o.shuffle = shuffle;
  o.seed = seed;
  return o;
}

// (shard, window) of each row, after checking the row is a real window: T+1
// consecutive tokens of one shard, starting at a multiple of T, y = x shifted.
std::vector<std::pair<int64_t, int64_t>> windows_of(const torch::Tensor& x, const torch::Tensor& y, int64_t T) {
  std::vector<std::pair<int64_t, int64_t>> out;
  auto xa = x.accessor<int64_t, 2>();
  auto ya = y.accessor<int64_t, 2>();
  for (int64_t b = 0; b < x.size(0); ++b) {
    int64_t first = xa[b][0];
    int64_t shard = first / kStride, pos = first % kStride;
    REQUIRE(pos % T == 0);
    for (int64_t t = 0; t < T; ++t) {
      REQUIRE(xa[b][t] == first + t);
      REQUIRE(ya[b][t] == first + t + 1);
    }
    out.emplace_back(shard, pos / T);
  }
  return out;
}

std::string error_of(const LoaderOptions& o) {
  try {
    TokenLoader l(o);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("loader: same seed and position give the same batches, another seed another order", "[data]") {
  TempDir dir("prism-loader");
  auto shards = make_shards(dir, {1001, 2001, 1501});
  TokenLoader a(options(shards, 4, 16)), b(options(shards, 4, 16)), c(options(shards, 4, 16, true, 8));
  CHECK(a.tokens() == 1001 + 2001 + 1501);
  CHECK(a.windows() == 1000 / 16 + 2000 / 16 + 1500 / 16);
  CHECK(a.batches_per_epoch() == a.windows() / 4);
  bool differs = false;
  REQUIRE(a.batches_per_epoch() == 70);
  for (int i = 0; i < 75; ++i) {  // into epoch 1
    auto [xa, ya] = a.next();
    auto [xb, yb] = b.next();
    auto [xc, yc] = c.next();
    REQUIRE(xa.sizes() == torch::IntArrayRef({4, 16}));
    REQUIRE(xa.dtype() == torch::kInt64);
    CHECK(torch::equal(xa, xb));
    CHECK(torch::equal(ya, yb));
    differs |= !torch::equal(xa, xc);
    windows_of(xa, ya, 16);
  }
  CHECK(differs);
  CHECK(a.state().epoch == 1);
}

TEST_CASE("loader: one shuffled epoch reads every window once, and the next epoch another order", "[data]") {
  TempDir dir("prism-loader");
  auto shards = make_shards(dir, {641, 321, 961});  // 40 + 20 + 60 windows of T = 16: 15 batches of 8
  TokenLoader l(options(shards, 8, 16));
  REQUIRE(l.batches_per_epoch() == 15);
  std::set<std::pair<int64_t, int64_t>> seen;
  std::vector<std::pair<int64_t, int64_t>> epoch0, epoch1;
  for (int i = 0; i < 15; ++i) {
    auto [x, y] = l.next();
    for (auto w : windows_of(x, y, 16)) seen.insert(w), epoch0.push_back(w);
  }
  CHECK(seen.size() == 120);
  for (int i = 0; i < 15; ++i) {
    auto [x, y] = l.next();
    for (auto w : windows_of(x, y, 16)) epoch1.push_back(w);
  }
  CHECK(std::set<std::pair<int64_t, int64_t>>(epoch1.begin(), epoch1.end()) == seen);
  CHECK(epoch1 != epoch0);
}

TEST_CASE("loader: restore(state()) continues exactly, across an epoch boundary too", "[data]") {
  TempDir dir("prism-loader");
  auto shards = make_shards(dir, {1001, 777});
  for (int stop : {0, 5, 23, 27, 60}) {  // 27 batches per epoch
    INFO("stopped after " << stop);
    TokenLoader run(options(shards, 4, 16, true, 99));
    REQUIRE(run.batches_per_epoch() == 27);
    for (int i = 0; i < stop; ++i) run.next();
    LoaderState saved = run.state();
    std::vector<torch::Tensor> want;
    for (int i = 0; i < 35; ++i) want.push_back(run.next().first);

    TokenLoader resumed(options(shards, 4, 16, true, 12345));  // the seed comes from the state
    resumed.restore(saved);
    for (int i = 0; i < 35; ++i) REQUIRE(torch::equal(resumed.next().first, want[i]));
    CHECK(resumed.state().position == run.state().position);
    CHECK(resumed.state().epoch == run.state().epoch);
  }
}

TEST_CASE("loader: ranks read disjoint windows whose union is the world-size-1 batch of B x world", "[data]") {
  TempDir dir("prism-loader");
  auto shards = make_shards(dir, {1601, 1201, 801});
  const int world = 3;
  const int64_t B = 2, T = 8;
  TokenLoader single(options(shards, B * world, T));
  std::vector<std::unique_ptr<TokenLoader>> ranks;
  for (int r = 0; r < world; ++r) {
    auto o = options(shards, B, T);
    o.rank = r;
    o.world_size = world;
    ranks.push_back(std::make_unique<TokenLoader>(o));
    CHECK(ranks.back()->batches_per_epoch() == single.batches_per_epoch());
  }
  for (int step = 0; step < single.batches_per_epoch() + 10; ++step) {
    auto [xs, ys] = single.next();
    std::vector<torch::Tensor> parts_x, parts_y;
    std::set<std::pair<int64_t, int64_t>> step_windows;
    for (auto& l : ranks) {
      auto [x, y] = l->next();
      parts_x.push_back(x);
      parts_y.push_back(y);
      for (auto w : windows_of(x, y, T)) step_windows.insert(w);
    }
    REQUIRE(step_windows.size() == static_cast<size_t>(B * world));  // disjoint across ranks
    REQUIRE(torch::equal(torch::cat(parts_x), xs));
    REQUIRE(torch::equal(torch::cat(parts_y), ys));
  }
  // The state of a rank resumes on a loader with the same global batch in another split.
  auto o = options(shards, B * world, T);
  TokenLoader resumed(o);
  resumed.restore(ranks[0]->state());
  CHECK(torch::equal(resumed.next().first, single.next().first));
}

TEST_CASE("loader: sequential mode reads the val shard from the start, window after window", "[data]") {
  TempDir dir("prism-loader");
  auto shards = make_shards(dir, {1000});
  TokenLoader val(options(shards, 3, 10, false));
  REQUIRE(val.batches_per_epoch() == 999 / 10 / 3);
  std::vector<int64_t> stream;
  int64_t last_y = -1;
  for (int i = 0; i < val.batches_per_epoch(); ++i) {
    auto [x, y] = val.next();
    auto flat = x.reshape({-1});
    stream.insert(stream.end(), flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel());
    last_y = y.reshape({-1})[-1].item<int64_t>();
  }
  stream.push_back(last_y);
  REQUIRE(stream.size() == static_cast<size_t>(val.batches_per_epoch() * 30 + 1));
  for (size_t i = 0; i < stream.size(); ++i) REQUIRE(stream[i] == static_cast<int64_t>(i));
  // reset() starts the pass again; a second pass is the same.
  val.reset();
  CHECK(val.next().first[0][0].item<int64_t>() == 0);
}

TEST_CASE("loader: short shards, too little data and foreign states are errors naming the cause", "[data]") {
  TempDir dir("prism-loader");
  auto shards = make_shards(dir, {300, 16});
  CHECK_THAT(error_of(options(shards, 2, 16)),
             Catch::Contains("t_train_000001.bin") && Catch::Contains("16 tokens") && Catch::Contains("lower T"));
  CHECK_THAT(error_of(options({shards[0]}, 64, 16)),
             Catch::Contains("18 windows") && Catch::Contains("fewer than one batch") && Catch::Contains("Fix:"));
  CHECK_THAT(error_of(options({dir.file("gone.bin")}, 2, 16)), Catch::Contains("gone.bin") && Catch::Contains("not found"));
  write_file(dir.file("junk.bin"), std::string(2000, 'j'));
  CHECK_THAT(error_of(options({dir.file("junk.bin")}, 2, 16)), Catch::Contains("junk.bin") && Catch::Contains("magic"));
  auto bad_rank = options({shards[0]}, 2, 16);
  bad_rank.rank = 2;
  bad_rank.world_size = 2;
  CHECK_THAT(error_of(bad_rank), Catch::Contains("rank 2"));

  TokenLoader a(options({shards[0]}, 2, 16)), b(options({shards[0]}, 2, 8));
  CHECK_THROWS_WITH(b.restore(a.state()), Catch::Contains("other data or another shape"));
  LoaderState past = a.state();
  past.position = 1000;
  CHECK_THROWS_WITH(a.restore(past), Catch::Contains("past the"));
}


TEST_CASE("loader: a token id outside the model's vocabulary is an error naming the shard and its offset", "[data]") {
  TempDir dir("prism-loader");
  std::vector<uint16_t> toks(200, 7);
  toks[150] = 300;  // in the window of tokens [144, 160] at T = 16 (window 9)
  const std::string path = dir.file("v_val_000000.bin");
  write_shard(path, toks);
  auto opt = options({path}, 2, 16, /*shuffle=*/false);
  opt.vocab_size = 300;
  TokenLoader loader(opt);
  for (int i = 0; i < 4; ++i) CHECK_NOTHROW(loader.next());  // windows 0-7 are clean
  try {
    loader.next();  // windows 8 and 9
    FAIL("no error for token 300 in a vocabulary of 300");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("v_val_000000.bin") && Catch::Contains("token id 300") &&
                                          Catch::Contains("token offset 150") &&
                                          Catch::Contains(fmt::format("byte {}", 1024 + 300)) &&
                                          Catch::Contains("vocabulary of 300") && Catch::Contains("Fix:"));
  }
  opt.vocab_size = 301;  // the same data is fine for a vocabulary that holds the id
  TokenLoader wide(opt);
  for (int i = 0; i < 6; ++i) CHECK_NOTHROW(wide.next());
  // The last token of a window (a target only) is checked too.
  std::vector<uint16_t> tail(33, 1);
  tail[16] = 999;  // window 0 is tokens [0, 16]: 16 is its last target
  const std::string p2 = dir.file("w_val_000000.bin");
  write_shard(p2, tail);
  auto o2 = options({p2}, 1, 16, false);
  o2.vocab_size = 500;
  TokenLoader last(o2);
  CHECK_THROWS_WITH(last.next(), Catch::Contains("token offset 16"));
}
TEST_CASE("loader: find_shards follows llm.c's naming, and shard 0 is val without it", "[data]") {
  TempDir dir("prism-loader");
  for (int i = 0; i < 4; ++i) {
    auto w = run_reference("llmc_shard.py",
                           fmt::format("write '{}' 5000 {}", dir.file(fmt::format("fineweb_{}_{:06d}.bin", i ? "train" : "val", i)), i));
    REQUIRE(w.exit_code == 0);
  }
  auto val = find_shards(dir.path(), "val");
  auto train = find_shards(dir.path(), "train");
  REQUIRE(val.size() == 1);
  CHECK_THAT(val[0], Catch::EndsWith("fineweb_val_000000.bin"));
  REQUIRE(train.size() == 3);
  CHECK_THAT(train[2], Catch::EndsWith("fineweb_train_000003.bin"));
  // llm.c's shards feed the loader unchanged.
  TokenLoader l(options(train, 4, 64));
  CHECK(l.tokens() == 15000);
  auto [x, y] = l.next();
  CHECK(torch::equal(x.index({torch::indexing::Slice(), torch::indexing::Slice(1)}),
                     y.index({torch::indexing::Slice(), torch::indexing::Slice(0, -1)})));

  TempDir plain("prism-loader");
  make_shards(plain, {100, 100, 100}, "x");
  for (int i = 0; i < 3; ++i)
    std::filesystem::rename(plain.file(fmt::format("x_{}_{:06d}.bin", i ? "train" : "val", i)), plain.file(fmt::format("part{}.bin", i)));
  CHECK_THAT(find_shards(plain.path(), "val").at(0), Catch::EndsWith("part0.bin"));
  CHECK(find_shards(plain.path(), "train").size() == 2);

  TempDir tiny("prism-loader");  // llm.c's tinyshakespeare naming: one shard per split, no index
  make_shards(tiny, {100, 100}, "x");
  std::filesystem::rename(tiny.file("x_val_000000.bin"), tiny.file("tiny_shakespeare_val.bin"));
  std::filesystem::rename(tiny.file("x_train_000001.bin"), tiny.file("tiny_shakespeare_train.bin"));
  CHECK_THAT(find_shards(tiny.path(), "val").at(0), Catch::EndsWith("tiny_shakespeare_val.bin"));
  CHECK_THAT(find_shards(tiny.path(), "train").at(0), Catch::EndsWith("tiny_shakespeare_train.bin"));

  CHECK_THROWS_WITH(find_shards(dir.file("nope"), "train"), Catch::Contains("not found") && Catch::Contains("prism data prepare"));
  CHECK_THROWS_WITH(find_shards(dir.path(), "test"), Catch::Contains("unknown split"));
  std::filesystem::remove(val[0]);
  CHECK_THROWS_WITH(find_shards(dir.path(), "val"), Catch::Contains("no val shards"));
}

TEST_CASE("loader: a missing or empty corpus names the recipe that makes it", "[data]") {
  // As a user meets it: README's corpus not prepared yet, from the repository root.
  TempDir root("prism-loader-recipe");
  std::filesystem::create_directories(root.file("data/recipes"));
  std::filesystem::create_directories(root.file("data/cache/novels"));  // text fetched, no shards yet
  test::write_file(root.file("data/recipes/novels-bpe.yaml"),
                   "name: novels\ninput: ../cache/novels/text\noutput: ../cache/novels-bpe\nvocab_size: 512\n");
  test::write_file(root.file("data/recipes/novels.yaml"), "input: ../cache/novels/text\noutput: ../cache/novels\n");
  test::write_file(root.file("data/recipes/broken.yaml"), "input: [\n");
  const auto before = std::filesystem::current_path();
  std::filesystem::current_path(root.path());
  struct Restore {
    std::filesystem::path p;
    ~Restore() { std::filesystem::current_path(p); }
  } restore{before};
  CHECK_THROWS_WITH(find_shards("data/cache/novels", "train"),
                    Catch::Contains("no .bin token shards") && Catch::Contains("`prism data prepare --recipe novels`"));
  CHECK_THROWS_WITH(find_shards("data/cache/novels-bpe", "val"),
                    Catch::Contains("data directory not found") &&
                        Catch::Contains("`prism data prepare --recipe novels-bpe`"));
  CHECK_THROWS_WITH(find_shards(root.file("data/cache/novels-bpe"), "val"),  // the same directory, spelled absolute
                    Catch::Contains("--recipe novels-bpe"));
  CHECK_THROWS_WITH(find_shards("data/cache/other", "val"),
                    Catch::Contains("not found") && Catch::Contains("prism data prepare") && !Catch::Contains("--recipe novels"));
}
