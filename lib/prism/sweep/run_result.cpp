#include "prism/sweep/run_result.h"

#include <cmath>
#include <limits>

#include "prism/store/run_reader.h"
#include "prism/store/run_unigram.h"

namespace prism {

double RunResult::best_val_loss() const {
  double best = std::numeric_limits<double>::quiet_NaN();
  for (double v : val_loss)
    if (std::isfinite(v) && !(best <= v)) best = v;
  return best;
}

double RunResult::final_val_loss() const {
  return val_loss.empty() ? std::numeric_limits<double>::quiet_NaN() : val_loss.back();
}

double RunResult::final_val_loss_se() const {
  return val_loss_se.empty() ? std::numeric_limits<double>::quiet_NaN() : val_loss_se.back();
}

RunResult read_run_result(const std::string& path) {
  const RunReader reader(path);
  RunResult r;
  r.status = reader.status();
  r.heads = reader.attributes().heads;
  r.seed = reader.attributes().seed;
  r.unigram_val_loss = run_unigram_val_loss(reader.attributes());
  r.dtype = run_dtype(reader.attributes());
  const std::vector<TrainRow> train = reader.train();
  if (!train.empty()) {
    r.steps = train.back().step;
    r.tokens = train.back().tokens;
    r.train_time_s = train.back().time_s;
  }
  for (const ValRow& v : reader.val()) {
    r.val_steps.push_back(v.step);
    r.val_tokens.push_back(v.tokens);
    r.val_loss.push_back(v.loss);
    r.val_loss_se.push_back(v.loss_se);
  }
  return r;
}

}  // namespace prism
