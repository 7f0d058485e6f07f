// Shared by the libFuzzer targets: the readers take paths, so each input is
// written to a per-process temp file first; InputError is the expected answer
// to a bad file, anything else escapes and libFuzzer reports it as a crash.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace cohort::fuzz {

// Writes data to the same temp file on every call and returns its path.
inline const std::string& write_input(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string path = (std::filesystem::temp_directory_path() /
                                   ("cohort_fuzz_" + std::to_string(::getpid()) + suffix))
                                      .string();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace cohort::fuzz
