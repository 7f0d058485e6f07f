#include "train/config.h"

namespace cohort {

int TrainConfig::ranks_needed() const {
  if (parallel == "mp" || parallel == "pp") return stages;
  if (parallel == "hybrid") return dp * stages;
  return 0;
}

std::string TrainConfig::describe() const {
  std::ostringstream os;
  os << "--model " << model << "\n--data " << data << "\n--data-dir " << data_dir
     << "\n--epochs " << epochs << "\n--batch " << batch << "\n--lr " << lr << "\n--optimizer "
     << optimizer << "\n--momentum " << momentum << "\n--weight-decay " << weight_decay
     << "\n--lr-schedule " << schedule << "\n--warmup " << warmup_steps << "\n--clip " << clip_norm
     << "\n--seed " << seed << "\n--repeat " << repeat << "\n--limit " << limit << "\n--eval " << eval
     << "\n--parallel " << parallel << "\n--replicas " << replicas
     << "\n--stages " << stages << "\n--split " << split << "\n--balance " << balance << "\n--micro-batches " << micro_batches
     << "\n--schedule " << pipe_schedule << "\n--dp " << dp << "\n--servers " << servers
     << "\n--ps-mode " << ps_mode << "\n--staleness " << staleness << "\n--allreduce " << allreduce << "\n--bucket-mb "
     << bucket_mb << "\n--no-overlap " << !overlap << "\n--accumulate " << accumulate
     << "\n--timeout " << timeout << "\n--deterministic " << deterministic << "\n--load "
     << load << "\n--resume " << resume << "\n";
  return os.str();
}

}  // namespace cohort
