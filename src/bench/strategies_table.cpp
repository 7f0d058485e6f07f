#include "bench/strategies_table.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace cohort {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

std::string num(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// A field as a number with `digits` decimals, or "" when absent.
std::string field(const ordered_json& r, const char* key, int digits) {
  return r.contains(key) && r[key].is_number() ? num(r[key].get<double>(), digits) : "";
}

std::string ratio(const ordered_json& r, const char* key) {
  return r.contains(key) ? num(r[key].get<double>(), 2) + "x" : "";
}

// Markdown cells may not hold '|'.
std::string cell(std::string s) {
  for (char& c : s)
    if (c == '|') c = '/';
  return s;
}

std::string notes(const ordered_json& r, int cores) {
  std::vector<std::string> n;
  if (r["status"] != "ok") n.push_back("**failed**: " + r.value("error", std::string()));
  if (r.contains("pipeline")) {
    const json& p = r["pipeline"];
    std::string s;
    if (p.contains("bubble_fraction"))
      s = "bubble " + num(p["bubble_fraction"].get<double>(), 2) +
          (p.contains("ideal_bubble_fraction")
               ? " (ideal " + num(p["ideal_bubble_fraction"].get<double>(), 2) + ")"
               : "");
    if (p.contains("peak_activation_mb") && p["peak_activation_mb"].is_array()) {
      std::string mb;
      for (auto& v : p["peak_activation_mb"])
        mb += (mb.empty() ? "" : "/") + num(v.get<double>(), 1);
      s += (s.empty() ? "" : ", ") + std::string("activations ") + mb + " MB per stage";
    }
    if (!s.empty()) n.push_back(s);
  }
  if (r.contains("ps")) {
    const json& p = r["ps"];
    if (p.contains("staleness_mean"))
      n.push_back("staleness mean " + num(p["staleness_mean"].get<double>(), 2) + ", max " +
                  num(p.value("staleness_max", 0.0), 0));
  }
  if (r.contains("note")) n.push_back(r["note"].get<std::string>());
  if (r.contains("reported_global_batch"))
    n.push_back("train reports global batch " + r["reported_global_batch"].dump());
  const int ranks = r["ranks"].get<int>();
  if (ranks * r["threads_per_rank"].get<int>() > cores)
    n.push_back(std::to_string(ranks) + " ranks on " + std::to_string(cores) + " CPUs");
  std::string s;
  for (auto& x : n) s += (s.empty() ? "" : "; ") + x;
  return cell(s);
}

// Peak resident memory of the row's fullest rank, MB (rank 0's where the
// run reported no per-rank figures, as the PyTorch peer does).
std::string peak_memory(const ordered_json& r) {
  if (r.contains("peak_memory_mb_per_rank") && r["peak_memory_mb_per_rank"].is_array() &&
      !r["peak_memory_mb_per_rank"].empty()) {
    double most = 0;
    for (auto& v : r["peak_memory_mb_per_rank"]) most = std::max(most, v.get<double>());
    return num(most, 0);
  }
  return field(r, "peak_memory_mb", 0);
}

}  // namespace

std::string strategies_table(const std::vector<ordered_json>& rows, const TableInfo& info) {
  const bool two = info.epochs >= 2;
  const std::string last = "epoch " + std::to_string(info.epochs) + " s";
  std::ostringstream os;
  os << "| strategy | ranks | threads/rank | global batch | epoch 1 s |"
     << (two ? " " + last + " |" : "")
     << " images/s | utilization | vs single | cohort vs PyTorch | peak MB/rank | notes |\n";
  os << "|---|---|---|---|---|" << (two ? "---|" : "") << "---|---|---|---|---|---|\n";
  for (auto& r : rows) {
    os << "| " << r["label"].get<std::string>() << " | " << r["ranks"].get<int>() << " | "
       << r["threads_per_rank"].get<int>() << " | " << r["global_batch"].get<int>() << " ("
       << r["batch_per_rank"].get<int>() << "/rank) | ";
    if (r["status"] != "ok") {
      os << "failed |" << (two ? " |" : "") << " | | | | | " << notes(r, info.cores) << " |\n";
      continue;
    }
    const json& es = r["epoch_seconds"];
    os << (es.size() > 0 ? num(es[0].get<double>(), 2) : "") << " | ";
    if (two) os << (es.size() > 1 ? num(es.back().get<double>(), 2) : "") << " | ";
    std::string util = field(r, "utilization", 2);
    if (r.value("communication_in_compute", false) && !util.empty()) util += " \xE2\x80\xA0";
    std::string versus = ratio(r, "cohort_vs_pytorch");
    if (!versus.empty()) versus = r["cohort_row"].get<std::string>() + ": " + versus;
    os << field(r, "images_per_second", 1) << " | " << util << " | " << ratio(r, "vs_single")
       << " | " << versus << " | " << peak_memory(r) << " | " << notes(r, info.cores)
       << " |\n";
  }
  return os.str();
}

std::string strategies_report(const std::vector<ordered_json>& rows, const TableInfo& info,
                              const std::string& table) {
  std::string cpu;
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; cpu.empty() && std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) cpu = line.substr(line.find(':') + 2);
  std::string torch;
  for (auto& r : rows)
    if (r.contains("torch")) torch = r["torch"].get<std::string>();
  std::ostringstream os;
  os << "# Strategies: " << info.model << " at global batch " << info.global_batch << "\n\n"
     << "    " << info.command << "\n\n"
     << info.date << "; " << info.cores << " CPU(s) (" << (cpu.empty() ? "unknown CPU" : cpu) << ")"
     << (torch.empty() ? "" : "; PyTorch " + torch) << "; load average " << info.load_before
     << " before the run, " << info.load_after
     << " after it (other work on these CPUs slows the rows it overlaps). Every row trains "
     << info.model << " on " << info.data << " data, " << info.limit << " images an epoch, for "
     << info.epochs << " epoch(s), at global batch " << info.global_batch << ".\n\n"
     << table << "\n"
     << "How to read it:\n\n"
     << "- Each row is one `cohort train --log jsonl` run (or the PyTorch peer's `train`); "
        "logs/ROW.log has its command and stderr, results.jsonl every figure.\n"
     << "- The batch per rank is the global batch over the data-parallel ranks; threads per "
        "rank are the CPUs over the ranks (at least 1), so rows with more ranks than CPUs "
        "oversubscribe them. On 2 vCPUs that share one core's vector units, two compute-bound "
        "ranks together get about one core's throughput.\n"
     << "- Epoch seconds are rank 0's wall time for the epoch's training steps (evaluation "
        "excluded); images/s are the last epoch's.\n"
     << "- Utilization is the compute share of rank 0's step: compute / (compute + "
        "communication wait + data wait). For mp and pp, rank 0 is the first stage; for ps, "
        "the first worker. PyTorch counts all but indexing the batch as compute; \xE2\x80\xA0: "
        "DDP's all-reduce runs inside backward, so there it counts as compute too.\n"
     << "- Peak MB/rank: the peak resident memory (getrusage's maxrss) of the row's fullest "
        "rank, so a ZeRO row compares with dp's at the same ranks; results.jsonl has every "
        "rank's (peak_memory_mb_per_rank). It includes each process's runtime (oneDNN, MPI, "
        "the dataset), not only the model's state.\n"
     << "- vs single: images/s over cohort's single process. cohort vs PyTorch (on PyTorch "
        "rows): cohort's matching row over PyTorch's images/s (single : single, dp : DDP, "
        "pp-gpipe : Pipe).\n"
     << "- PyTorch's DataParallel needs CUDA (on a CPU-only machine it runs the bare module), "
        "so it has no row; cohort's replicas is its counterpart. PyTorch 1.13 has no "
        "process-per-stage pipeline: `torch.distributed.pipeline.sync.Pipe` (GPipe, needs the "
        "RPC framework initialized) runs every partition in one process, and on CPU all "
        "partitions share one worker thread, so they take turns: its row shows the cost of "
        "micro-batching, not overlap. It runs without activation checkpointing, as cohort does. "
        "PyTorch has no parameter server, model-parallel or hybrid strategy of its own.\n";
  return os.str();
}

}  // namespace cohort
