#include "core/timeline.h"

#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace cohort::timeline {

namespace detail {
std::atomic<bool> g_on{false};
}

namespace {

// One thread's events: appended by that thread only, read at render time
// (after the threads have handed their work back under a lock: happens-before).
struct Buffer {
  std::vector<Event> events;
  int32_t lane = 0;
  size_t dropped = 0;
};

// Lanes, buffers and interned names of the process. Never destroyed: a
// detached thread may still hold its buffer at exit.
struct Registry {
  std::mutex mu;
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<std::string> lane_names;
  std::unordered_map<std::string, int32_t> lane_ids;
  std::unordered_set<std::string> interned;
};

Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

thread_local Buffer* tl_buffer = nullptr;
thread_local const char* tl_name = nullptr;

// A new lane named `name` (the caller holds the lock).
int32_t new_lane(Registry& r, const std::string& name) {
  r.lane_names.push_back(name);
  return int32_t(r.lane_names.size() - 1);
}

Buffer& my_buffer() {
  if (tl_buffer) return *tl_buffer;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto b = std::make_unique<Buffer>();
  b->lane = new_lane(r, tl_name ? tl_name : "thread");
  b->events.reserve(4096);
  tl_buffer = b.get();
  r.buffers.push_back(std::move(b));
  return *tl_buffer;
}

// JSON string contents: quotes, backslashes and control characters escaped.
void append_escaped(std::string& out, const char* s) {
  for (; *s; ++s) {
    const unsigned char c = static_cast<unsigned char>(*s);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char u[8];
      std::snprintf(u, sizeof u, "\\u%04x", c);
      out += u;
    } else {
      out += char(c);
    }
  }
}

void append_us(std::string& out, int64_t ns) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.3f", double(ns) / 1000.0);
  out += buf;
}

// {"name":..,"cat":..,"ph":..,"pid":..,"tid":..,"ts":..  (left open)
int64_t tid_of(int pid, int32_t lane) { return int64_t(pid) * kLanesPerProcess + lane; }

void open_event(std::string& out, const Event& e, char ph, int pid, int64_t tid, int64_t ts_ns) {
  out += "{\"name\":\"";
  append_escaped(out, e.name);
  out += "\",\"cat\":\"";
  append_escaped(out, e.cat ? e.cat : "cohort");
  out += "\",\"ph\":\"";
  out += ph;
  out += "\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"ts\":";
  append_us(out, ts_ns);
}

void append_args(std::string& out, const Event& e) {
  if (e.id < 0 && e.bytes < 0) return;
  out += ",\"args\":{";
  if (e.id >= 0) {
    out += '"';
    append_escaped(out, e.id_name ? e.id_name : "id");
    out += "\":" + std::to_string(e.id);
  }
  if (e.bytes >= 0) out += std::string(e.id >= 0 ? "," : "") + "\"bytes\":" + std::to_string(e.bytes);
  out += '}';
}

void append_event(std::string& out, const Event& e, int32_t lane, const RenderOptions& o,
                  int64_t& async_id) {
  if (!out.empty()) out += ",\n";
  const int64_t b = e.begin_ns - o.origin_ns, end = e.end_ns - o.origin_ns;
  if (e.ph == 'a') {  // a nestable async pair, its id unique in the file
    const std::string id = ",\"id\":\"" + std::to_string(o.pid) + "." + std::to_string(++async_id) + "\"";
    open_event(out, e, 'b', o.pid, tid_of(o.pid, lane), b);
    out += id;
    append_args(out, e);
    out += "},\n";
    open_event(out, e, 'e', o.pid, tid_of(o.pid, lane), end);
    out += id + "}";
    return;
  }
  open_event(out, e, e.ph, o.pid, tid_of(o.pid, lane), b);
  if (e.ph == 'X') {
    out += ",\"dur\":";
    append_us(out, end - b);
  } else if (e.ph == 'i') {
    out += ",\"s\":\"t\"";
  }
  append_args(out, e);
  out += '}';
}

void append_metadata(std::string& out, const char* what, int pid, int64_t tid, const std::string& key,
                     const std::string& value_json) {
  if (!out.empty()) out += ",\n";
  out += "{\"name\":\"" + std::string(what) + "\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
         ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"" + key + "\":" + value_json + "}}";
}

}  // namespace

void start() {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    for (auto& b : r.buffers) {
      b->events.clear();
      b->dropped = 0;
    }
  }
  detail::g_on.store(true, std::memory_order_relaxed);
}

void stop() { detail::g_on.store(false, std::memory_order_relaxed); }

void name_thread(const char* name) {
  tl_name = name;
  if (!tl_buffer) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.lane_names[size_t(tl_buffer->lane)] = name;
}

int32_t lane(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.lane_ids.find(name);
  if (it != r.lane_ids.end()) return it->second;
  const int32_t id = new_lane(r, name);
  r.lane_ids.emplace(name, id);
  return id;
}

int32_t thread_lane() { return my_buffer().lane; }

const char* intern(const std::string& s) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.interned.insert(s).first->c_str();
}

void record(const Event& e) {
  if (!on()) return;
  Buffer& b = my_buffer();
  if (b.events.size() >= kMaxEventsPerThread) {
    ++b.dropped;
    return;
  }
  b.events.push_back(e);
}

size_t dropped_count() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  size_t n = 0;
  for (const auto& b : r.buffers) n += b->dropped;
  return n;
}

std::string render(const RenderOptions& o) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::string out;
  std::set<int32_t> used;
  int64_t async_id = 0;
  for (const auto& b : r.buffers)
    for (const Event& e : b->events) {
      const int32_t lane = e.lane >= 0 ? e.lane : b->lane;
      used.insert(lane);
      append_event(out, e, lane, o, async_id);
    }
  std::string name_json = "\"";
  append_escaped(name_json, o.process_name.c_str());
  name_json += '"';
  append_metadata(out, "process_name", o.pid, tid_of(o.pid, 0), "name", name_json);
  append_metadata(out, "process_sort_index", o.pid, tid_of(o.pid, 0), "sort_index",
                  std::to_string(o.pid));
  for (int32_t lane : used) {
    std::string lane_json = "\"";
    append_escaped(lane_json, r.lane_names[size_t(lane)].c_str());
    lane_json += '"';
    append_metadata(out, "thread_name", o.pid, tid_of(o.pid, lane), "name", lane_json);
    append_metadata(out, "thread_sort_index", o.pid, tid_of(o.pid, lane), "sort_index",
                    std::to_string(lane));
  }
  return out;
}

size_t event_count() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  size_t n = 0;
  for (const auto& b : r.buffers) n += b->events.size();
  return n;
}

}  // namespace cohort::timeline
