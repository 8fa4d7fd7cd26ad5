#pragma once
// PostRecord: a trial's record of its post-processing steps (<run dir>/post.json),
// what makes post-processing resumable. Each step ("eval/hellaswag", "distance",
// "delta") has a status and the key of what it was computed from (checkpoint,
// task file, settings); a step is done when its status is done, its key is the
// key it would have now and its result is in run.h5. A step that fails records
// why; one left "running" was cut short (a crash, a kill, a time limit).
#include <map>
#include <string>

namespace prism {

struct PostStep {
  std::string status;   // running | done | failed | waiting (delta: the baseline is not measured yet)
  std::string key;      // what it was computed from
  std::string message;  // why it failed or waits
  double wall_s = 0;
  std::string finished; // ISO time
};

struct PostRecord {
  std::map<std::string, PostStep> steps;
};

// An absent file is an empty record. Throws prism::Error naming the file when it is not JSON.
PostRecord read_post_record(const std::string& run_dir);
// Written atomically (a temporary file, then a rename).
void write_post_record(const std::string& run_dir, const PostRecord& record);

}  // namespace prism
