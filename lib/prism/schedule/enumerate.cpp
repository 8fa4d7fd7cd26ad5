#include "prism/schedule/enumerate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "prism/error.h"

namespace prism {

std::vector<int> default_wide_head_dims(int d_model, int h_base) {
  std::vector<int> dims;
  int base = d_model / h_base;
  for (int dh = 256; dh > base; dh /= 2)
    if (d_model % dh == 0) dims.push_back(dh);
  return dims;
}

std::vector<HeadSchedule> enumerate_schedules(const EnumerationSpace& sp) {
  if (sp.n_layer <= 0 || sp.d_model <= 0 || sp.h_base <= 0 || sp.d_model % sp.h_base != 0)
    throw Error(fmt::format("cannot enumerate schedules for {} layers x {} with {} baseline heads", sp.n_layer,
                            sp.d_model, sp.h_base),
                "schedule enumeration", "use a baseline head count that divides d_model");
  if (sp.rules.block_min < 1 || sp.rules.block_max < sp.rules.block_min)
    throw Error(fmt::format("block lengths {}..{} are empty", sp.rules.block_min, sp.rules.block_max),
                "schedule enumeration", "use 1 <= block_min <= block_max");
  const int base_dh = sp.d_model / sp.h_base;
  std::vector<int> dims = sp.head_dims.empty() ? default_wide_head_dims(sp.d_model, sp.h_base) : sp.head_dims;
  std::sort(dims.begin(), dims.end(), std::greater<int>());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  for (int dh : dims) {
    if (dh <= base_dh || sp.d_model % dh != 0)
      throw Error(fmt::format("head width {} is not a wide head width for d_model {} (baseline width {})", dh,
                              sp.d_model, base_dh),
                  "schedule enumeration head_dims",
                  fmt::format("use widths above {} that divide {}", base_dh, sp.d_model));
  }
  const int min_base = static_cast<int>(std::ceil(sp.rules.baseline_share * sp.n_layer - 1e-9));
  const int early_max = sp.n_layer - std::max(min_base, 1);

  std::vector<HeadSchedule> out;
  auto keep = [&](const HeadSchedule& s) {
    if (check_schedule(s, sp.n_layer, sp.d_model, sp.h_base, sp.rules).ok()) out.push_back(s);
  };
  if (sp.include_uniform) keep(HeadSchedule::uniform(sp.n_layer, sp.h_base));

  const int n = static_cast<int>(dims.size());
  for (int stages = 1; stages <= n; ++stages) {
    // Subsets of `stages` widths in lexicographic index order (widest first within).
    std::vector<int> pick(static_cast<size_t>(stages));
    std::function<void(int, int)> choose = [&](int pos, int from) {
      if (pos == stages) {
        std::vector<int> lens(static_cast<size_t>(stages));
        std::function<void(int, int)> lengths = [&](int i, int used) {
          if (i == stages) {
            std::vector<Stair> stairs;
            for (int k = 0; k < stages; ++k) stairs.push_back({dims[pick[k]], lens[k]});
            stairs.push_back({base_dh, sp.n_layer - used});
            keep(HeadSchedule::from_staircase(stairs, sp.d_model));
            return;
          }
          for (int len = sp.rules.block_min; len <= sp.rules.block_max && used + len <= early_max; ++len) {
            lens[i] = len;
            lengths(i + 1, used + len);
          }
        };
        lengths(0, 0);
        return;
      }
      for (int i = from; i < n; ++i) {
        pick[pos] = i;
        choose(pos + 1, i + 1);
      }
    };
    choose(0, 0);
  }
  return out;
}

}  // namespace prism
