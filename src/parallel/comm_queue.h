// One background thread that runs communication tasks in the order they
// were queued. ZeRO stages 2 and 3 queue every collective of a step here
// (gradient reduce-scatters as backward finishes a layer, parameter gathers
// a layer ahead of compute), so each rank issues them in the same order
// from one thread while its main thread computes.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace cohort {

class CommQueue {
 public:
  using Ticket = uint64_t;  // 1, 2, ... in queueing order
  CommQueue();
  ~CommQueue();
  CommQueue(const CommQueue&) = delete;
  CommQueue& operator=(const CommQueue&) = delete;

  Ticket push(std::function<void()> task);
  // Returns once task t and every task before it has run; rethrows the
  // first task's error (the queue stops running tasks after one fails).
  void wait(Ticket t);
  void drain() { wait(queued_); }
  // Whether task t has run (or a task failed: wait(t) then rethrows).
  bool finished(Ticket t);

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  Ticket queued_ = 0, done_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace cohort
