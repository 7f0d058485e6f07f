#include "bench/flag_lists.h"

#include <sstream>

#include "core/error.h"

namespace cohort {

std::vector<int> parse_int_list(const std::string& s, const std::string& flag, int min) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    COHORT_INPUT_CHECK(used == item.size() && v >= min, flag, ": expected integers >= ", min,
                       ", got '", item, "'");
    out.push_back(v);
  }
  COHORT_INPUT_CHECK(!out.empty(), flag, ": empty list");
  return out;
}

std::vector<std::string> parse_str_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace cohort
