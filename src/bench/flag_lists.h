// Comma lists given to the bench subcommands' flags (`--workers 1,2,4`,
// `--only single,dp`), as grid, tune and strategies read them.
#pragma once
#include <string>
#include <vector>

namespace cohort {

// Comma list of integers >= min; InputError naming `flag` otherwise.
std::vector<int> parse_int_list(const std::string& s, const std::string& flag, int min = 1);
// "a,b,,c" -> {a, b, c}.
std::vector<std::string> parse_str_list(const std::string& s);

}  // namespace cohort
