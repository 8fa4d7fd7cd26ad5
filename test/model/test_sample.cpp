#include <catch2/catch.hpp>

#include "prism/error.h"
#include "prism/model/sample.h"

using namespace prism;

TEST_CASE("sampling: seeded, greedy equals top-1, stops at the stop token", "[model][sample]") {
  torch::manual_seed(0);
  GPT m(model_preset("test-tiny"), HeadSchedule::parse("2,4"));
  std::vector<int64_t> prompt = {1, 2, 3};
  SampleOptions o;
  o.max_new_tokens = 40;  // longer than block_size 32: the context is cropped
  o.temperature = 1.0;
  o.seed = 7;
  auto a = sample(m, prompt, o), b = sample(m, prompt, o);
  CHECK(a.size() == 40);
  CHECK(a == b);
  o.seed = 8;
  CHECK(sample(m, prompt, o) != a);
  SampleOptions greedy;
  greedy.max_new_tokens = 10;
  greedy.temperature = 0;
  SampleOptions top1 = greedy;
  top1.temperature = 1.0;
  top1.top_k = 1;
  auto g = sample(m, prompt, greedy);
  CHECK(sample(m, prompt, top1) == g);
  // The greedy token is the argmax of the model's last logits.
  auto logits = m->forward(torch::tensor(prompt).unsqueeze(0)).logits;
  CHECK(g[0] == logits.select(1, -1).argmax().item<int64_t>());
  SampleOptions stop = greedy;
  stop.stop_token = g[3];
  auto s = sample(m, prompt, stop);
  CHECK(s.back() == g[3]);
  CHECK(s.size() <= 4);
  int seen = 0;
  sample(m, prompt, greedy, [&](int64_t) { ++seen; });
  CHECK(seen == 10);
  CHECK_THROWS_AS(sample(m, {}, greedy), Error);
}
