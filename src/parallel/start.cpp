#include "parallel/start.h"

#include <sstream>

#include "core/error.h"

namespace cohort {

// Rank 0's text is broadcast and compared line by line on every rank.
static std::string broadcast_text(comm::Communicator& comm, const std::string& text) {
  uint64_t len = text.size();
  comm.broadcast(&len, sizeof len, 0);
  std::string out = text;
  out.resize(len);
  comm.broadcast(out.data(), len, 0);
  return out;
}

static std::string first_difference(const std::string& mine, const std::string& theirs) {
  std::istringstream a(mine), b(theirs);
  std::string la, lb;
  while (true) {
    const bool ga = bool(std::getline(a, la)), gb = bool(std::getline(b, lb));
    if (!ga && !gb) return "";
    if (!ga || !gb || la != lb) return (ga ? la : "(nothing)") + " here, " + (gb ? lb : "(nothing)");
  }
}

void check_and_broadcast(comm::Communicator& comm, nn::Model& model, const std::string& flags) {
  std::ostringstream desc;
  for (auto& p : model.params().infos()) desc << "parameter " << p.name << " " << shape_str(p.shape) << "\n";
  for (auto& p : model.buffers().infos()) desc << "buffer " << p.name << " " << shape_str(p.shape) << "\n";
  const std::string flag_diff = first_difference(flags, broadcast_text(comm, flags));
  const std::string model_diff = first_difference(desc.str(), broadcast_text(comm, desc.str()));
  // Every rank learns whether any rank differs, so all stop together.
  float bad = (flag_diff.empty() && model_diff.empty()) ? 0.0f : 1.0f;
  comm.allreduce(&bad, 1, comm::ReduceOp::kSum, comm::Algorithm::kMpi);
  if (!flag_diff.empty())
    throw InputError(detail::concat("rank ", comm.rank(), " was started with other flags than rank 0: ",
                                    flag_diff, " on rank 0"));
  if (!model_diff.empty())
    throw InputError(detail::concat("rank ", comm.rank(), " built another model than rank 0: ",
                                    model_diff, " on rank 0"));
  if (bad > 0) throw InputError(detail::concat("rank ", comm.rank(), ": another rank's model or flags differ from rank 0's"));
  comm.broadcast(model.params().params().data(), model.params().params().nbytes(), 0);
  if (model.buffers().size())
    comm.broadcast(model.buffers().params().data(), model.buffers().params().nbytes(), 0);
}

}  // namespace cohort
