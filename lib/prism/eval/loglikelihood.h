#pragma once
// Log-likelihood of continuations given contexts under a GPT, batched, with
// lm-evaluation-harness's tokenisation and truncation:
//  - trailing whitespace of the context moves to the front of the continuation;
//  - the continuation's tokens are those of encode(context + continuation)
//    after the first len(encode(context)) tokens (so BPE sees the joint text);
//  - an empty context is the end-of-text token;
//  - context + continuation keeps its last block_size + 1 tokens; the model
//    reads all but the last, and the continuation's log-probabilities are summed.
#include <torch/torch.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "prism/data/tokenizer.h"
#include "prism/model/gpt.h"

namespace prism {

struct EncodedRequest {
  std::vector<int64_t> context, continuation;
};

EncodedRequest encode_request(const Gpt2Tokenizer& tokenizer, const std::string& context,
                              const std::string& continuation);

struct ContinuationScore {
  double loglikelihood = 0;  // sum over the continuation tokens of log p(token | everything before it)
  bool greedy = false;       // every continuation token is the model's argmax
};

struct ScoreOptions {
  int64_t batch_tokens = 4096;  // padded tokens per forward pass (the logits are batch_tokens x vocab floats)
  std::optional<attention::Backend> backend;  // the forward passes' attention back end (unset: the model's)
  std::function<void(int64_t done, int64_t total)> progress;  // requests scored so far
};

// Scores every request on the model's device, many per forward pass (longest
// first, right-padded), in any order internally; results in input order.
// Throws prism::Error for a continuation longer than the model's context.
std::vector<ContinuationScore> score_requests(GPT& model, const std::vector<EncodedRequest>& requests,
                                              const ScoreOptions& options = {});

}  // namespace prism
