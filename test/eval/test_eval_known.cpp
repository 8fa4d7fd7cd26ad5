// A model whose answers are known by construction: a hand-built bigram model
// (attention switched off, the MLP maps each token of the gold answers' texts
// to its successors there) must pick the gold choice of every fixture item, in
// every task, by acc and by acc_norm.
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <set>

#include "data/data_support.h"
#include "prism/eval/evaluate.h"

using namespace prism;
using prism::test::source_path;

namespace {

struct Fixture {
  Task task;
  std::string file, labels;
};

const std::vector<Fixture> kFixtures = {
    {Task::HellaSwag, "hellaswag.jsonl", ""},
    {Task::Piqa, "piqa.jsonl", "piqa-labels.lst"},
    {Task::ArcEasy, "arc_easy.jsonl", ""},
    {Task::WinoGrande, "winogrande.jsonl", ""},
};

std::vector<TaskItem> items_of(const Fixture& f) {
  TaskReadOptions o;
  if (!f.labels.empty()) o.labels_path = source_path("test/fixtures/" + f.labels);
  return read_task(f.task, source_path("test/fixtures/" + f.file), o).items;
}

// Token embeddings are orthogonal (and zero-mean, so LayerNorm keeps them); attention
// and the position table are zero, so the residual stream at token a is wte[a]. The
// MLP unit of a fires on it alone and adds its successors' embeddings many times
// over, so the LM head (tied to wte) gives each of the k successors the same logit
// d_model / sqrt(k) and every other token 0 or less: P(b | a) = 1 / k up to e^-100.
GPT bigram_model(const std::map<int64_t, std::set<int64_t>>& successors, const std::set<int64_t>& vocab) {
  ModelConfig cfg;
  cfg.n_layer = 1;
  cfg.d_model = 512;
  cfg.n_head = 4;
  cfg.block_size = 64;
  cfg.vocab_size = 50257;
  GPT m(cfg, HeadSchedule({4}));
  torch::NoGradGuard ng;
  for (auto& p : m->parameters()) p.zero_();
  auto& block = *m->h[0]->as<Block>();
  block.ln_1->weight.fill_(1);
  block.ln_2->weight.fill_(1);
  m->ln_f->weight.fill_(1);
  torch::manual_seed(5);
  REQUIRE(int64_t(vocab.size()) < cfg.d_model);
  auto basis = torch::randn({cfg.d_model, int64_t(vocab.size())}, torch::kDouble);
  basis -= basis.mean(0);  // zero-mean columns, and so is every column of Q
  auto q = std::get<0>(torch::linalg_qr(basis)) * std::sqrt(double(cfg.d_model));
  int64_t i = 0;
  for (int64_t t : vocab) m->wte->weight[t].copy_(q.select(1, i++));
  const int64_t units = 4 * cfg.d_model;
  REQUIRE(int64_t(successors.size()) <= units);
  int64_t j = 0;
  for (const auto& [a, next] : successors) {
    block.mlp->c_fc->weight[j].copy_(m->wte->weight[a]);
    block.mlp->c_fc->bias[j].fill_(-0.6 * cfg.d_model);  // v_a . v_a = d_model fires; v_a . v_t = 0 does not
    for (int64_t b : next) block.mlp->c_proj->weight.select(1, j).add_(m->wte->weight[b]);
    ++j;
  }
  m->eval();
  return m;
}

}  // namespace

TEST_CASE("eval: a bigram model built from the gold answers picks them in every task", "[eval][known]") {
  Gpt2Tokenizer tok(prism::test::vocab_path());
  std::map<int64_t, std::set<int64_t>> successors;
  std::set<int64_t> vocab;
  for (const auto& f : kFixtures)
    for (const auto& item : items_of(f)) {
      for (const auto& c : item.choices) {  // every text the model will read gets an embedding
        auto r = encode_request(tok, c.context, c.continuation);
        vocab.insert(r.context.begin(), r.context.end());
        vocab.insert(r.continuation.begin(), r.continuation.end());
      }
      const auto& gold = item.choices[size_t(item.label)];
      auto r = encode_request(tok, gold.context, gold.continuation);
      std::vector<int64_t> all = r.context;
      all.insert(all.end(), r.continuation.begin(), r.continuation.end());
      for (size_t k = 0; k + 1 < all.size(); ++k) successors[all[k]].insert(all[k + 1]);
    }
  GPT model = bigram_model(successors, vocab);
  for (const auto& f : kFixtures) {
    INFO(task_name(f.task));
    TaskEvaluation e = evaluate_task(model, tok, f.task, items_of(f));
    CHECK(e.accuracy.acc == 1.0);
    CHECK(e.accuracy.acc_norm == 1.0);
    CHECK(e.accuracy.n == int64_t(e.items.size()));
    for (size_t i = 0; i < e.items.size(); ++i) {
      const auto label = size_t(e.items[i].label);
      // Every step of the gold continuation is in the table: log(1 / k) per token.
      const auto& r = e.requests[i][label];
      double expected = 0;
      int64_t prev = r.context.back();
      for (int64_t t : r.continuation) {
        expected -= std::log(double(successors.at(prev).size()));
        prev = t;
      }
      const double gold = e.scores[i][label].loglikelihood;
      CHECK(gold == Approx(expected).margin(1e-3));
      // Any other choice leaves the table somewhere and pays far more there.
      for (size_t c = 0; c < e.scores[i].size(); ++c)
        if (c != label) CHECK(e.scores[i][c].loglikelihood < gold - 10.0);
    }
  }
}
