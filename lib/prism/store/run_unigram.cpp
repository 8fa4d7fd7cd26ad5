#include "prism/store/run_unigram.h"

#include <yaml-cpp/yaml.h>

#include <cmath>

#include "prism/data/dataset.h"

namespace prism {

double run_unigram_val_loss(const RunAttributes& attrs) {
  if (std::isfinite(attrs.unigram_val_loss)) return attrs.unigram_val_loss;
  try {
    const YAML::Node config = YAML::Load(attrs.config);
    const YAML::Node dir = config["data"] ? config["data"]["dir"] : YAML::Node();
    if (dir && dir.IsScalar()) return describe_data(dir.as<std::string>()).unigram_val_loss;
  } catch (const std::exception&) {
    // An unreadable config or prepare.json leaves the baseline unknown; the loss itself is still reported.
  }
  return attrs.unigram_val_loss;
}

}  // namespace prism
