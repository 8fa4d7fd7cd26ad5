#pragma once
// PostSettings: what post-processing does to each trial of a study sweep, read
// from a post file (experiments/study/post/paper.yaml is the paper's):
//
//   task_dir: /scratch/tasks                 # the task files' folder (relative paths below are in it)
//   tasks:                                   # zero-shot tasks (prism eval), any of the four
//     hellaswag:  {data: hellaswag_val.jsonl}
//     piqa:       {data: piqa/valid.jsonl, labels: piqa/valid-labels.lst}
//     arc_easy:   {data: ARC-Easy-Test.jsonl}
//     winogrande: {data: winogrande/dev.jsonl}
//   eval: {limit: 0, batch_tokens: 0}        # items per task (0: all); padded tokens per pass (0: the device's)
//   distance:                                # held-out attention distance (prism distance); false: none
//     {data: "", tokens: 65536, batch: 8, bins: 8, seq_len: 0}   # data "": each trial's data.dir
//   device: auto                             # auto | cpu | cuda, for every step
//   backend: auto                            # the attention back end, whatever the trials trained with
//   threads: 0                               # per trial process (0: the cores divided by --jobs)
//   slurm: {time: "04:00:00"}                # replaces these keys of the sweep's sweep.slurm
//
// Keys can be overridden on the command line (task_dir=/scratch/tasks). Unknown
// keys are errors. The resolved settings (absolute paths) are saved beside the
// sweep as post.yaml, which the trial processes and Slurm tasks read.
#include <cstdint>
#include <string>
#include <vector>

#include "prism/sweep/plan.h"

namespace prism {

struct PostTask {
  std::string task;    // hellaswag | piqa | arc_easy | winogrande
  std::string data;    // the task's jsonl file (absolute once resolved)
  std::string labels;  // piqa's labels file ("": a label field on every line)
};

struct PostSettings {
  std::string source;               // the post file
  std::vector<PostTask> tasks;      // in the order of the file
  int64_t limit = 0;
  int64_t batch_tokens = 0;
  bool distance = true;
  std::string distance_data;        // "": each trial's data.dir
  int64_t distance_tokens = 65536;
  int64_t distance_batch = 8;
  int64_t distance_bins = 8;
  int64_t distance_seq_len = 0;
  std::string device = "auto";
  std::string backend = "auto";
  int threads = 0;
  SlurmSettings slurm;              // the sweep's, with the post file's keys applied
  std::vector<std::string> slurm_keys;  // the keys the post file set
};

// Reads a post file with key=value overrides; relative task paths resolve
// against task_dir (itself against the working directory). Throws prism::Error
// naming the file and key for unknown keys or tasks and bad values.
PostSettings load_post_settings(const std::string& path, const std::vector<std::string>& overrides = {});

// Throws prism::Error, before anything runs, naming each file that is missing
// (a task file, a labels file, the distance data) and where to get it.
void check_post_files(const PostSettings& s);

// The settings as a post file (absolute paths; what <sweep>/post.yaml holds).
std::string post_settings_yaml(const PostSettings& s);

// The sweep's Slurm settings with the post file's keys in place of theirs.
SlurmSettings post_slurm(const PostSettings& s, const SlurmSettings& sweep);

}  // namespace prism
