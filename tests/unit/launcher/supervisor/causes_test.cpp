// Why a step ended (launcher/supervisor/causes.hpp): every real message of end_messages.tsv (Slurm,
// c10d/Gloo/NCCL, CUDA, libc, HDF5, each with its source) named with its cause, and the
// classifier's order over whole step ends: a lost node, Slurm's word, the exit status, the
// workers' own end lines, then the messages, an originating cause before its consequences.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "common/exit_codes.hpp"
#include "supervisor/causes.hpp"

namespace hpctrain::supervisor {
namespace {

using records::Cause;

std::string name(Cause c) { return std::string(records::name_of(c)); }

struct Row {
  std::string cause, source, message;
  int line = 0;
};

std::vector<Row> table() {
  const std::string path =
      std::string(HPCTRAIN_SOURCE_DIR) + "/tests/unit/launcher/supervisor/end_messages.tsv";
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::vector<Row> rows;
  std::string text;
  int n = 0;
  while (std::getline(in, text)) {
    ++n;
    if (text.empty() || text[0] == '#') continue;
    std::istringstream fields(text);
    Row r;
    r.line = n;
    std::getline(fields, r.cause, '\t');
    std::getline(fields, r.source, '\t');
    std::getline(fields, r.message);
    rows.push_back(r);
  }
  return rows;
}

TEST(Causes, EveryRealMessageNamesItsCause) {
  const auto rows = table();
  std::map<std::string, int> per_cause;
  for (const auto& r : rows) {
    ASSERT_TRUE(r.cause == "none" || records::parse<Cause>(r.cause))
        << "end_messages.tsv:" << r.line << ": " << r.cause << " is no cause";
    ASSERT_FALSE(r.message.empty()) << "end_messages.tsv:" << r.line;
    const auto got = cause_of_line(r.message);
    EXPECT_EQ(got ? name(*got) : "none", r.cause)
        << "end_messages.tsv:" << r.line << " (" << r.source << "): " << r.message;
    ++per_cause[r.cause];
  }
  // Each cause a message alone can name has real messages behind it.
  for (const char* c : {"preempted", "time_limit", "cancelled", "node_lost", "oom", "filesystem",
                        "network", "gpu_hardware", "bad_input"}) {
    EXPECT_GE(per_cause[c], 2) << c << ": too few real messages in end_messages.tsv";
  }
}

TEST(Causes, OrdinaryLinesNameNone) {
  for (const char* line :
       {"[rank 0/2 node1] step 100/400 epoch 1: loss 2.3026 lr 0.10000 1234 images/s",
        "[rank 0/2 node1] eval epoch 1 step 100: top-1 10.00% top-5 50.00% loss 2.3026",
        "hpctrain: node lost: node2 (no answer from slurmd on node2 within 2 s); Connection reset",
        "hpctrain: the run stopped: oom", "srun: Job step created", ""}) {
    EXPECT_FALSE(cause_of_line(line)) << line;
  }
}

EndFacts ended(int status, std::vector<std::string> lines = {}) {
  EndFacts f;
  f.status = status;
  f.lines = std::move(lines);
  return f;
}

TEST(Causes, CompletedOnlyWithRankZerosEnd) {
  auto f = ended(0);
  f.finished = true;
  EXPECT_EQ(name(classify(f).cause), "completed");
  // srun exits 0 when no task could be launched (a stale PMIx directory, say): not completed.
  f = ended(0, {"slurmstepd: error: mpi/pmix_v4: pmixp_usock_create_srv: node1 [0]: "
                "pmixp_utils.c:105: Cannot bind() UNIX socket: Address already in use"});
  const auto c = classify(f);
  EXPECT_EQ(name(c.cause), "unknown");
  EXPECT_NE(c.evidence.find("no end of training"), std::string::npos) << c.evidence;
}

TEST(Causes, SlurmsWordBeforeTheStatus) {
  auto f = ended(143, {"slurmstepd: error: *** STEP 12.0 ON node1 CANCELLED AT "
                       "2026-11-27T10:00:00 DUE TO TIME LIMIT ***"});
  f.terminated = true;
  EXPECT_EQ(name(classify(f).cause), "time_limit");
  f.lines = {"slurmstepd: error: *** JOB 12 ON node1 CANCELLED AT 2026-11-27T10:00:00 ***"};
  EXPECT_EQ(name(classify(f).cause), "cancelled");
  f.lines.clear();
  for (const auto& [state, cause] :
       std::vector<std::pair<std::string, std::string>>{{"TIMEOUT", "time_limit"},
                                                        {"CANCELLED", "cancelled"},
                                                        {"PENDING", "preempted"},
                                                        {"REQUEUED", "preempted"},
                                                        {"PREEMPTED", "preempted"},
                                                        {"NODE_FAIL", "node_lost"},
                                                        {"OUT_OF_MEMORY", "oom"}}) {
    f.slurm_state = state;
    const auto c = classify(f);
    EXPECT_EQ(name(c.cause), cause) << state;
    EXPECT_EQ(c.evidence, "Slurm: job state " + state);
  }
  f.slurm_state = "";
  const auto c = classify(f);
  EXPECT_EQ(name(c.cause), "unknown") << "TERM without Slurm's word";
  EXPECT_NE(c.evidence.find("TERM"), std::string::npos);
}

TEST(Causes, TheWorkersStopLineSaysTimeLimitOrPreemption) {
  EXPECT_EQ(name(classify(ended(kExitRequeue, {"[rank 0/2 n1] stopping at step 40 (the job's "
                                               "time limit is near); last committed "
                                               "checkpoint: step 40; exiting for the job to be "
                                               "requeued"}))
                     .cause),
            "time_limit");
  EXPECT_EQ(name(classify(ended(kExitRequeue, {"[rank 0/2 n1] stopping at step 40 (signal User "
                                               "defined signal 2); last committed checkpoint: "
                                               "step 40"}))
                     .cause),
            "preempted");
  EXPECT_EQ(name(classify(ended(kExitRequeue)).cause), "preempted");
  // The workers' end line on stderr (their stop line goes to rank 0's stdout, unread).
  EXPECT_EQ(name(classify(ended(kExitRequeue, {"[rank 0/2 n1] hpctrain-worker ended: time_limit "
                                               "(exit status 75): checkpointed at step 40 before "
                                               "the job's time limit"}))
                     .cause),
            "time_limit");
}

TEST(Causes, ExitStatusesOfTheProtocol) {
  EXPECT_EQ(name(classify(ended(kExitBadInput)).cause), "bad_input");
  EXPECT_EQ(name(classify(ended(kExitHang)).cause), "hang");
  EXPECT_EQ(name(classify(ended(kExitEvict)).cause), "straggler");
  EXPECT_EQ(name(classify(ended(kExitDiverged)).cause), "diverged");
  const auto c = classify(ended(1, {"some line", "[rank 1/2 n2] Segmentation fault"}));
  EXPECT_EQ(name(c.cause), "unknown");
  EXPECT_EQ(c.evidence, "exit status 1 | some line | [rank 1/2 n2] Segmentation fault");
}

TEST(Causes, ALostNodeIsTheCauseWhateverElseWasSaid) {
  auto f = ended(kExitPeerLost, {"[rank 0/4 n1] Connection reset by peer"});
  f.node_lost = records::LossCause::kSilent;
  f.loss_text = "no answer from slurmd on n2 within 2 s";
  auto c = classify(f);
  EXPECT_EQ(name(c.cause), "node_lost");
  EXPECT_EQ(c.evidence, f.loss_text);
  f.node_lost = records::LossCause::kHang;
  EXPECT_EQ(name(classify(f).cause), "hang");
  f.node_lost = records::LossCause::kStraggler;
  EXPECT_EQ(name(classify(f).cause), "straggler");
  f.node_lost = records::LossCause::kCorruption;
  EXPECT_EQ(name(classify(f).cause), "gpu_hardware") << "a node computing wrong results";
}

TEST(Causes, TheOriginBeforeItsConsequences) {
  // Rank 1 ran out of memory; its peers then saw the connection reset. Whatever the order.
  const std::vector<std::string> lines = {
      "[rank 0/2 n1] [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Read error "
      "[10.0.0.2]:35710: Connection reset by peer",
      "[rank 1/2 n2] DefaultCPUAllocator: can't allocate memory: you tried to allocate 411041792 "
      "bytes. Error code 12 (Cannot allocate memory)"};
  EXPECT_EQ(name(classify(ended(1, lines)).cause), "oom");
  EXPECT_EQ(name(classify(ended(1, {lines[1], lines[0]})).cause), "oom");
  // A full filesystem, then a peer's reset.
  EXPECT_EQ(name(classify(ended(1, {"[rank 0/2 n1] write /runs/a/checkpoints/.step-000000040.tmp/"
                                    "model.pt: No space left on device",
                                    lines[0]}))
                     .cause),
            "filesystem");
  // The worker's own end line names what only it knows (a rank's exit 2 behind srun's 1).
  const auto c = classify(ended(1, {lines[0],
                                    "[rank 1/2 n2] hpctrain-worker ended: bad_input "
                                    "(exit status 2): data.train: no file matches"}));
  EXPECT_EQ(name(c.cause), "bad_input");
  EXPECT_NE(c.evidence.find("no file matches"), std::string::npos);
  // The supervisor's own lines in the same stderr are not read as the step's.
  EXPECT_EQ(name(classify(ended(1, {"hpctrain: cannot run srun: No space left on device"})).cause),
            "unknown");
}

TEST(Causes, TheRunDirectorysFilesystemWhereItsLinesWereLost) {
  // What the step's stderr kept when the run directory was full (tests/slurm/causes_planted.sh):
  // the workers' lines were lost, srun's came after their temporary files were removed.
  const std::vector<std::string> lost = {"srun: error: vm: task 0: Exited with exit code 1",
                                         "srun: launch/slurm: _step_signal: Terminating StepId=3.0",
                                         "srun: error: vm: task 1: Exited with exit code 76"};
  auto f = ended(76, lost);
  EXPECT_EQ(name(classify(f).cause), "unknown");
  f.filesystem = "/runs/a: 368 KiB free, less than the newest checkpoint took (2.2 MiB)";
  auto c = classify(f);
  EXPECT_EQ(name(c.cause), "filesystem");
  EXPECT_EQ(c.evidence, f.filesystem);
  // A peer's reset connection is a consequence: the filesystem comes first.
  f.lines.push_back(
      "[rank 1/2 vm] lost the store on rank 0 (vm) at vm:41361: Failed to recv, got "
      "0 bytes. Connection was likely closed.");
  EXPECT_EQ(name(classify(f).cause), "filesystem");
  // A message that says more is believed first: out of memory, or the errno itself.
  f.lines.push_back("[rank 0/2 vm] DefaultCPUAllocator: can't allocate memory");
  EXPECT_EQ(name(classify(f).cause), "oom");
  f.lines = {
      "[rank 0/2 vm] create directory /runs/a/checkpoints/.step-000000124.tmp: Read-only "
      "file system"};
  EXPECT_NE(classify(f).evidence.find("Read-only"), std::string::npos);
  // The exit statuses that say enough are not overruled, nor is a finished run.
  f.lines = lost;
  f.status = kExitBadInput;
  EXPECT_EQ(name(classify(f).cause), "bad_input");
  f.status = 0;
  f.finished = true;
  EXPECT_EQ(name(classify(f).cause), "completed");
  // An exit 0 without rank 0's end of training, on a read-only filesystem: the end-of-training
  // checkpoint could not be written there.
  f.finished = false;
  f.filesystem = "/runs/a/checkpoints: read-only";
  EXPECT_EQ(name(classify(f).cause), "filesystem");
}

TEST(Causes, EvidenceIsClipped) {
  const std::string long_line =
      "NCCL error: remote process exited or there was a network error " + std::string(2000, 'x');
  const auto c = classify(ended(1, {long_line}));
  EXPECT_EQ(name(c.cause), "network");
  EXPECT_EQ(c.evidence.size(), kEvidenceChars);
}

TEST(Causes, AdviceForTheCausesThatStop) {
  EXPECT_NE(advice_for(Cause::kOom, 64).find("train.batch_size (64 per rank now)"),
            std::string::npos);
  EXPECT_NE(advice_for(Cause::kDiverged, 64).find("train.optimizer.lr"), std::string::npos);
  EXPECT_NE(advice_for(Cause::kBadInput, 64).find("hpctrain submit"), std::string::npos);
  EXPECT_EQ(advice_for(Cause::kPreempted, 64), "");
}

}  // namespace
}  // namespace hpctrain::supervisor
