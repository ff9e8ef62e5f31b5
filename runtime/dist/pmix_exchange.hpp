// Rendezvous through PMIx (srun --mpi=pmix, Open MPI's mpirun): rank 0 publishes "host:port" of the
// store it listens on, everyone fences and reads it. The port is whatever the kernel gave rank 0's
// socket, so no two jobs can collide on it.
// Thread safety: one PmixSession per process, used from one thread.
#pragma once

#include <chrono>
#include <string>

namespace hpctrain::dist {

class PmixSession {
 public:
  // PMIx_Init; throws rt::LibraryError when there is no PMIx server.
  PmixSession();
  ~PmixSession();
  PmixSession(const PmixSession&) = delete;
  PmixSession& operator=(const PmixSession&) = delete;

  int rank() const { return rank_; }
  int job_size() const;  // PMIX_JOB_SIZE

  // Rank 0 passes the value to publish; every rank gets rank 0's value back after a fence with a
  // deadline (a rank that never arrives fails the fence with a timeout).
  std::string exchange_from_rank0(const std::string& key, const std::string& value_if_rank0,
                                  std::chrono::seconds timeout);

 private:
  std::string nspace_;
  int rank_ = -1;
};

}  // namespace hpctrain::dist
