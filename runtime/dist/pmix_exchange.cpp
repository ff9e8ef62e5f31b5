#include "dist/pmix_exchange.hpp"

#include <pmix.h>

#include <cstring>

#include "common/error.hpp"

namespace hpctrain::dist {
namespace {

std::string pmix_error(const char* what, pmix_status_t rc) {
  return std::string(what) + " failed: " + PMIx_Error_string(rc) + " (" + std::to_string(rc) + ")";
}

}  // namespace

PmixSession::PmixSession() {
  pmix_proc_t me;
  const pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
  if (rc != PMIX_SUCCESS) {
    HPCTRAIN_THROW(rt::LibraryError, pmix_error("PMIx_Init", rc) +
                                         "; was the worker started by srun --mpi=pmix or "
                                         "mpirun? (PMIX_NAMESPACE is set)");
  }
  nspace_ = me.nspace;
  rank_ = static_cast<int>(me.rank);
}

PmixSession::~PmixSession() { PMIx_Finalize(nullptr, 0); }

int PmixSession::job_size() const {
  pmix_proc_t job;
  PMIX_PROC_LOAD(&job, nspace_.c_str(), PMIX_RANK_WILDCARD);
  pmix_value_t* value = nullptr;
  const pmix_status_t rc = PMIx_Get(&job, PMIX_JOB_SIZE, nullptr, 0, &value);
  if (rc != PMIX_SUCCESS || !value) {
    HPCTRAIN_THROW(rt::LibraryError, pmix_error("PMIx_Get(PMIX_JOB_SIZE)", rc));
  }
  const int size = static_cast<int>(value->data.uint32);
  PMIX_VALUE_RELEASE(value);
  return size;
}

std::string PmixSession::exchange_from_rank0(const std::string& key,
                                             const std::string& value_if_rank0,
                                             std::chrono::seconds timeout) {
  if (rank_ == 0) {
    pmix_value_t value;
    value.type = PMIX_STRING;
    value.data.string = const_cast<char*>(value_if_rank0.c_str());
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &value);
    if (rc != PMIX_SUCCESS) HPCTRAIN_THROW(rt::LibraryError, pmix_error("PMIx_Put", rc));
    rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) HPCTRAIN_THROW(rt::LibraryError, pmix_error("PMIx_Commit", rc));
  }
  // Fence over the whole namespace, collecting data, with a deadline.
  pmix_proc_t all;
  PMIX_PROC_LOAD(&all, nspace_.c_str(), PMIX_RANK_WILDCARD);
  pmix_info_t info[2];
  bool collect = true;
  int seconds = static_cast<int>(timeout.count());
  PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &seconds, PMIX_INT);
  pmix_status_t rc = PMIx_Fence(&all, 1, info, 2);
  PMIX_INFO_DESTRUCT(&info[0]);
  PMIX_INFO_DESTRUCT(&info[1]);
  if (rc != PMIX_SUCCESS) {
    HPCTRAIN_THROW(rt::PeerError, pmix_error("PMIx_Fence", rc) + " within " +
                                      std::to_string(timeout.count()) +
                                      " s: not every rank reached the rendezvous");
  }
  pmix_proc_t root;
  PMIX_PROC_LOAD(&root, nspace_.c_str(), 0);
  pmix_info_t get_info;
  PMIX_INFO_LOAD(&get_info, PMIX_TIMEOUT, &seconds, PMIX_INT);
  pmix_value_t* value = nullptr;
  rc = PMIx_Get(&root, key.c_str(), &get_info, 1, &value);
  PMIX_INFO_DESTRUCT(&get_info);
  if (rc != PMIX_SUCCESS || !value || value->type != PMIX_STRING || !value->data.string) {
    if (value) PMIX_VALUE_RELEASE(value);
    HPCTRAIN_THROW(rt::LibraryError, pmix_error(("PMIx_Get(rank 0, " + key + ")").c_str(), rc));
  }
  std::string out = value->data.string;
  PMIX_VALUE_RELEASE(value);
  return out;
}

}  // namespace hpctrain::dist
