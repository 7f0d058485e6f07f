#include "core/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace cohort {

namespace {

std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string errno_str() { return std::strerror(errno); }

// An unnamed file in `dir`, or -1 (errno set) where O_TMPFILE is unsupported.
int open_unnamed(const std::string& dir) {
  return ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
}

std::string temp_name(const std::string& target) {
  return target + ".tmp." + std::to_string(::getpid());
}

}  // namespace

AtomicFile::AtomicFile(std::string target) : target_(std::move(target)) {
  remove_stale_temps(target_);
  fd_ = open_unnamed(folder_of(target_));
  if (fd_ >= 0) return;
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) fail("cannot create a file");
  temp_ = temp_name(target_);  // no O_TMPFILE here: a named temp file
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    temp_.clear();
    fail("cannot create " + temp_name(target_));
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty() && !committed_) ::unlink(temp_.c_str());
}

void AtomicFile::write(const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    // Chunked: a single write() of more than ~2 GiB is truncated on Linux anyway.
    ssize_t done = ::write(fd_, p, std::min<size_t>(size, size_t(1) << 30));
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) fail("cannot write");
    p += done;
    size -= size_t(done);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) fail("cannot fsync");
  if (temp_.empty()) {
    // Name the complete file (linkat through /proc needs no capability),
    // then rename: only this instant can leave a temp file, and the next
    // save removes it.
    temp_ = temp_name(target_);
    ::unlink(temp_.c_str());
    const std::string proc = "/proc/self/fd/" + std::to_string(fd_);
    if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, temp_.c_str(), AT_SYMLINK_FOLLOW) != 0) {
      const std::string why = "cannot link " + temp_;
      temp_.clear();
      fail(why);
    }
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("cannot close " + temp_);
  if (std::rename(temp_.c_str(), target_.c_str()) != 0) fail("cannot rename onto it");
  committed_ = true;
  // Make the rename itself durable; best effort, the data is already safe.
  const int dir_fd = ::open(folder_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void AtomicFile::fail(const std::string& what) {
  throw Error("saving " + target_ + " failed: " + what + ": " + errno_str());
}

void check_writable(const std::string& flag, const std::string& path) {
  const std::string dir = folder_of(path);
  int fd = open_unnamed(dir);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    COHORT_INPUT_CHECK(::access(dir.c_str(), W_OK | X_OK) == 0, flag, ": cannot write ", path,
                       ": ", errno_str());
    return;
  }
  COHORT_INPUT_CHECK(fd >= 0, flag, ": cannot write ", path, ": ", errno_str());
  ::close(fd);
  COHORT_INPUT_CHECK(!std::filesystem::is_directory(path), flag, ": ", path, " is a folder");
}

void remove_stale_temps(const std::string& target) {
  namespace fs = std::filesystem;
  const fs::path t(target);
  const std::string prefix = t.filename().string() + ".tmp.";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder_of(target), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const long p = std::strtol(pid.c_str(), nullptr, 10);
    if (p == long(::getpid())) continue;
    if (::kill(pid_t(p), 0) != 0 && errno == ESRCH) fs::remove(e.path(), ec);
  }
}

}  // namespace cohort
