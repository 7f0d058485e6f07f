// Files written whole or not at all. The data goes to an unnamed file in the
// target's folder (Linux O_TMPFILE), which no kill can leave behind; only
// when it is complete and fsynced is it linked under a temp name and renamed
// onto the target, so a crash never damages the target either. Where the
// file system has no O_TMPFILE, a named temp file "TARGET.tmp.PID" is used,
// and the next save to the same target removes any its dead writers left.
#pragma once
#include <cstddef>
#include <string>

namespace cohort {

class AtomicFile {
 public:
  // Opens the unnamed file beside `target`; Error naming the target on failure.
  explicit AtomicFile(std::string target);
  ~AtomicFile();  // without commit(): the file vanishes, the target is untouched
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t size);
  // fsync, then put the file in the target's place (and fsync the folder).
  void commit();

 private:
  [[noreturn]] void fail(const std::string& what);

  std::string target_, temp_;  // temp_: the named temp file, once there is one
  int fd_ = -1;
  bool committed_ = false;
};

// InputError ("<flag>: cannot write <path>: reason") unless a file can be
// created in path's folder: for output flags, checked before any work starts.
void check_writable(const std::string& flag, const std::string& path);

// Removes "<target>.tmp.<pid>" files whose writer is no longer running.
void remove_stale_temps(const std::string& target);

}  // namespace cohort
