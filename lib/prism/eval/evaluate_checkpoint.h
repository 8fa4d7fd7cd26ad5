#pragma once
// `prism eval` as one library call: a task file scored on a checkpoint (placed on
// the device and attention back end the caller chose, never the one it trained
// with), the accuracies printed, the per-choice record optionally dumped as JSON,
// and the result stored under /eval/<task> of the run's run.h5 (or another file).
#include <cstdint>
#include <functional>
#include <string>

#include "prism/eval/evaluate.h"
#include "prism/model/placement.h"

namespace prism {

struct EvalRequest {
  std::string checkpoint;          // run dir, checkpoint dir or model.safetensors
  std::string task;                // hellaswag | piqa | arc_easy | winogrande
  std::string data;                // the task's jsonl file
  std::string labels;              // piqa: the labels file ("": a 'label' field on every line)
  int64_t limit = 0;               // score only the first N items (0: all)
  std::string on_error = "stop";   // malformed lines: stop | skip (reported)
  int64_t batch_tokens = 0;        // padded tokens per forward pass (0: the device's default_batch_tokens)
  std::string dump;                // write every choice's tokens and log-likelihood to this JSON file
  std::string out;                 // write /eval/<task> here instead of the run's run.h5
  bool store = true;               // false: print only
  std::string vocab;               // the tokenizer's ranks file; "": the one the model trained with
  std::string gpt2_vocab;          // GPT-2's, for models whose config names no vocabulary (older runs, llm.c data)
  Placement placement;
  std::function<void(const std::string&)> print;  // the result lines (stdout)
  std::function<void(const std::string&)> note;   // what is read and skipped (stderr)
  std::function<void(int64_t done, int64_t total)> progress;  // requests scored
};

// Padded tokens per forward pass when none are asked for: the logits of a pass
// are batch_tokens x vocabulary floats, which a GPU holds many times over.
int64_t default_batch_tokens(const torch::Device& device);

// Throws prism::Error before any scoring for a bad request (unknown task or
// --on-error, a malformed line under stop, a result file of another schedule, a
// model whose vocabulary is smaller than the tokenizer's).
TaskEvaluation evaluate_checkpoint(const EvalRequest& request);

}  // namespace prism
