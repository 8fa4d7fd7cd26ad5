// Log-likelihood scoring: the harness's tokenisation rules, batching that
// changes nothing, truncation to the context, and acc / acc_norm.
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cmath>

#include "data/data_support.h"
#include "prism/error.h"
#include "prism/eval/evaluate.h"
#include "prism/eval/loglikelihood.h"
#include "prism/eval/metrics.h"
#include "support.h"

using namespace prism;

namespace {

std::vector<int64_t> ids(const Gpt2Tokenizer& t, const std::string& s) {
  auto v = t.encode(s);
  return std::vector<int64_t>(v.begin(), v.end());
}

GPT small_model() {
  torch::manual_seed(11);
  ModelConfig cfg = model_preset("test-tiny");
  cfg.vocab_size = 50257;
  cfg.block_size = 16;
  GPT m(cfg, HeadSchedule({2, 4}));
  m->eval();
  return m;
}

// Sum of log p(continuation | prefix) from one full forward pass, token by token.
double direct_loglikelihood(GPT& m, std::vector<int64_t> all, size_t n_cont) {
  torch::NoGradGuard ng;
  std::vector<int64_t> input(all.begin(), all.end() - 1);  // the last token is only predicted
  auto logits = m->forward(torch::tensor(input, torch::kLong).unsqueeze(0)).logits[0];
  auto lp = torch::log_softmax(logits.to(torch::kDouble), -1);
  double s = 0;
  for (size_t k = all.size() - n_cont; k < all.size(); ++k) s += lp[int64_t(k) - 1][all[k]].item<double>();
  return s;
}

}  // namespace

TEST_CASE("scoring: requests are tokenised as lm-evaluation-harness does", "[eval][scoring]") {
  Gpt2Tokenizer tok(prism::test::vocab_path());
  // Trailing whitespace of the context moves to the continuation.
  auto a = encode_request(tok, "Question: why?\nAnswer: ", "because");
  auto b = encode_request(tok, "Question: why?\nAnswer:", " because");
  CHECK(a.context == b.context);
  CHECK(a.continuation == b.continuation);
  CHECK(b.context == ids(tok, "Question: why?\nAnswer:"));
  CHECK(b.continuation == ids(tok, " because"));
  // The continuation is what follows the context's token count in the joint encoding.
  auto joint = encode_request(tok, "un", "believable");
  auto whole = ids(tok, "unbelievable");
  CHECK(joint.context == ids(tok, "un"));
  CHECK(joint.continuation == std::vector<int64_t>(whole.begin() + long(joint.context.size()), whole.end()));
  // An empty context is the end-of-text token.
  auto e = encode_request(tok, "", "Hello");
  CHECK(e.context == std::vector<int64_t>{50256});
  CHECK(e.continuation == ids(tok, "Hello"));
}

TEST_CASE("scoring: batched log-likelihoods equal one full forward pass per request", "[eval][scoring]") {
  GPT m = small_model();
  std::vector<EncodedRequest> reqs = {
      {{464, 3797, 3332}, {319, 262}},           // short
      {{50256}, {15496, 11, 995, 0}},             // EOT context
      {{40, 588, 257, 1310, 286, 8887, 13}, {383}},  // one continuation token
      {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {16, 17, 18}},  // truncated: 18 > block 16 + 1
  };
  ScoreOptions one, many;
  one.batch_tokens = 1;      // one request per forward pass
  many.batch_tokens = 1000;  // all of them together, right-padded
  auto s1 = score_requests(m, reqs, one);
  auto s2 = score_requests(m, reqs, many);
  REQUIRE(s1.size() == 4);
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    CHECK(s1[i].loglikelihood == Approx(s2[i].loglikelihood).margin(1e-4));
    CHECK(s1[i].loglikelihood < 0);
  }
  // Requests that fit: the direct computation on the whole sequence.
  for (size_t i = 0; i < 3; ++i) {
    std::vector<int64_t> all = reqs[i].context;
    all.insert(all.end(), reqs[i].continuation.begin(), reqs[i].continuation.end());
    CHECK(s1[i].loglikelihood == Approx(direct_loglikelihood(m, all, reqs[i].continuation.size())).margin(1e-4));
  }
  // The truncated one: the harness keeps the last block + 1 = 17 tokens (tokens 2..18).
  std::vector<int64_t> kept;
  for (int64_t t = 2; t <= 18; ++t) kept.push_back(t);
  CHECK(s1[3].loglikelihood == Approx(direct_loglikelihood(m, kept, 3)).margin(1e-4));
  // A continuation longer than the context window cannot be scored.
  std::vector<int64_t> long_cont(17, 5);
  CHECK_THROWS_WITH(score_requests(m, {{{1}, long_cont}}), Catch::Contains("longer context"));
}

TEST_CASE("scoring: many requests per forward pass give the unbatched acc and acc_norm on every task", "[eval][scoring]") {
  GPT m = small_model();
  Gpt2Tokenizer tok(prism::test::vocab_path());
  struct File {
    Task task;
    std::string path, labels;
  };
  for (const auto& f : {File{Task::HellaSwag, "test/fixtures/hellaswag.jsonl", ""},
                        File{Task::Piqa, "test/fixtures/piqa.jsonl", "test/fixtures/piqa-labels.lst"},
                        File{Task::ArcEasy, "test/fixtures/arc_easy.jsonl", ""},
                        File{Task::WinoGrande, "test/fixtures/winogrande.jsonl", ""}}) {
    INFO(task_name(f.task));
    TaskReadOptions ro;
    if (!f.labels.empty()) ro.labels_path = prism::test::source_path(f.labels);
    const auto items = read_task(f.task, prism::test::source_path(f.path), ro).items;
    REQUIRE(items.size() >= 4);
    ScoreOptions one, many;
    one.batch_tokens = 1;           // one request per forward pass
    many.batch_tokens = 1 << 20;    // every request of the task in one padded batch
    TaskEvaluation a = evaluate_task(m, tok, f.task, items, one);
    TaskEvaluation b = evaluate_task(m, tok, f.task, items, many);
    CHECK(a.accuracy.pred == b.accuracy.pred);
    CHECK(a.accuracy.pred_norm == b.accuracy.pred_norm);
    CHECK(a.accuracy.acc == b.accuracy.acc);
    CHECK(a.accuracy.acc_norm == b.accuracy.acc_norm);
    CHECK(a.accuracy.n == b.accuracy.n);
    for (size_t i = 0; i < items.size(); ++i)
      for (size_t c = 0; c < items[i].choices.size(); ++c)
        CHECK(a.scores[i][c].loglikelihood == Approx(b.scores[i][c].loglikelihood).margin(1e-4));
  }
}

TEST_CASE("scoring: acc picks the first maximum, acc_norm divides by the answer's characters, acc_bytes by its bytes",
          "[eval][scoring]") {
  // Item 1: raw favours the short answer 0; per character the long answer 1 wins.
  // Item 2: a tie goes to the first choice (numpy's argmax), which is the label.
  // Item 3: both wrong.
  // Item 4: the answers have 4 and 5 characters, 8 and 5 bytes ("ΟΔΟΣ" vs "roads"):
  // per character choice 1 wins (-10/5 > -9/4), per byte choice 0 (-9/8 > -10/5).
  std::vector<ChoiceScores> items = {
      {{-10.0, -12.0}, {5, 20}, 1, {5, 20}},
      {{-3.0, -3.0, -9.0}, {3, 3, 3}, 0, {3, 3, 3}},
      {{-1.0, -2.0}, {1, 1}, 1, {1, 1}},
      {{-9.0, -10.0}, {4, 5}, 1, {8, 5}},
  };
  Accuracy a = accuracy(items);
  CHECK(a.pred == std::vector<int>{0, 0, 0, 0});
  CHECK(a.pred_norm == std::vector<int>{1, 0, 0, 1});
  CHECK(a.pred_bytes == std::vector<int>{1, 0, 0, 0});
  CHECK(a.n == 4);
  CHECK(a.acc == Approx(1.0 / 4));
  CHECK(a.acc_norm == Approx(3.0 / 4));
  CHECK(a.acc_bytes == Approx(2.0 / 4));
  // stderr = sample sd / sqrt(n): hits {0,1,0,0}: sd sqrt(1/4), / sqrt(4).
  CHECK(a.acc_stderr == Approx(std::sqrt(0.25) / 2.0));
  CHECK_THROWS_AS(accuracy({{{-1.0}, {1, 2}, 0, {}}}), Error);
  CHECK_THROWS_AS(accuracy({{{-1.0, -2.0}, {1, 2}, 0, {1}}}), Error);
  // Without byte lengths there is no acc_bytes.
  Accuracy plain = accuracy({{{-1.0, -2.0}, {1, 2}, 0, {}}});
  CHECK(std::isnan(plain.acc_bytes));
  CHECK(plain.pred_bytes.empty());
}
