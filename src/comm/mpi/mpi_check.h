// COHORT_MPI(call): every MPI call goes through it. The communicators use
// MPI_ERRORS_RETURN, so a failure comes back as a code, which this turns into
// a CommError naming the call, its file:line and MPI's own message.
#pragma once
#include <mpi.h>

#include <string>

#include "comm/communicator.h"

namespace cohort::comm::detail {

[[noreturn]] inline void throw_mpi_error(int rc, const char* call, const char* file, int line) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
  throw CommError(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
                  (len ? std::string(msg, size_t(len)) : "MPI error " + std::to_string(rc)));
}

}  // namespace cohort::comm::detail

#define COHORT_MPI(call)                                                               \
  do {                                                                                 \
    const int cohort_mpi_rc_ = (call);                                                 \
    if (cohort_mpi_rc_ != MPI_SUCCESS)                                                 \
      ::cohort::comm::detail::throw_mpi_error(cohort_mpi_rc_, #call, __FILE__, __LINE__); \
  } while (0)
