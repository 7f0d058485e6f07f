#include "parallel/comm_queue.h"

#include "core/cpus.h"
#include "core/timeline.h"

namespace cohort {

CommQueue::CommQueue() : thread_([this] { loop(); }) {}

CommQueue::~CommQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // Unwinding from an error: the thread may sit in a collective another rank
  // will never join; the process is about to exit non-zero, so leave it.
  if (std::uncaught_exceptions() > 0)
    thread_.detach();
  else
    thread_.join();
}

CommQueue::Ticket CommQueue::push(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  tasks_.push_back(std::move(task));
  cv_.notify_all();
  return ++queued_;
}

void CommQueue::wait(Ticket t) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_ >= t || error_; });
  if (error_) std::rethrow_exception(error_);
}

bool CommQueue::finished(Ticket t) {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ >= t || error_;
}

void CommQueue::loop() {
  timeline::name_thread("comm queue");
  serial_openmp();
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
    if (stop_ || error_) return;
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    std::exception_ptr e;
    try {
      task();
    } catch (...) {
      e = std::current_exception();
    }
    lock.lock();
    if (e) error_ = e;
    ++done_;
    cv_.notify_all();
  }
}

}  // namespace cohort
