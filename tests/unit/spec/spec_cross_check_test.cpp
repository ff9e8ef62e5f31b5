// The checks across keys (and of things outside the spec) that run after every key passed its own:
// one test per check, each with values just inside and just outside what it allows.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "support/test_util.hpp"

namespace hpctrain::spec {
namespace {

using test::minimal_spec;
using test::TempDir;
using test::write_text;

struct Outcome {
  std::vector<Diagnostic> errors, warnings;

  bool error_on(const std::string& key) const { return names(errors, key); }
  bool warning_on(const std::string& key) const { return names(warnings, key); }
  bool clean() const { return errors.empty(); }
  std::string text() const { return format_all(errors) + format_all(warnings); }

 private:
  static bool names(const std::vector<Diagnostic>& all, const std::string& key) {
    return std::any_of(all.begin(), all.end(), [&](const Diagnostic& d) { return d.key == key; });
  }
};

class CrossCheck : public testing::Test {
 protected:
  // Loads `text` (the minimal spec unless given) with `overrides` as --set arguments.
  Outcome resolve(std::vector<std::string> overrides, const std::string& text = minimal_spec(),
                  bool check_paths = false) {
    write_text(dir_ / "spec.toml", text);
    auto options = test::options_for(dir_ / "spec.toml");
    options.overrides = std::move(overrides);
    options.check_paths = check_paths;
    try {
      return {{}, load(options).warnings};
    } catch (const SpecError& e) {
      return {e.diagnostics(), {}};
    }
  }

  TempDir dir_;
};

#define EXPECT_CLEAN(outcome)             \
  do {                                    \
    const Outcome o_ = (outcome);         \
    EXPECT_TRUE(o_.clean()) << o_.text(); \
  } while (0)
#define EXPECT_ERROR_ON(outcome, key)           \
  do {                                          \
    const Outcome o_ = (outcome);               \
    EXPECT_TRUE(o_.error_on(key)) << o_.text(); \
  } while (0)

TEST_F(CrossCheck, GpuJobsRunOneRankPerGpu) {
  EXPECT_CLEAN(resolve({"job.gpus_per_node=4", "job.tasks_per_node=4"}));
  EXPECT_ERROR_ON(resolve({"job.gpus_per_node=4", "job.tasks_per_node=3"}), "job.tasks_per_node");
  EXPECT_ERROR_ON(resolve({"job.gpus_per_node=4", "job.tasks_per_node=5"}), "job.tasks_per_node");
  EXPECT_CLEAN(resolve({"job.gpus_per_node=0", "job.tasks_per_node=3"}));
}

TEST_F(CrossCheck, Fp16NeedsGpus) {
  EXPECT_CLEAN(resolve({"job.gpus_per_node=1", "train.precision=fp16"}));
  EXPECT_ERROR_ON(resolve({"job.gpus_per_node=0", "train.precision=fp16"}), "train.precision");
  EXPECT_CLEAN(resolve({"job.gpus_per_node=0", "train.precision=bf16"}));
}

TEST_F(CrossCheck, NodeLossPolicyFitsTheSpares) {
  EXPECT_CLEAN(resolve({"resilience.spare_nodes=1", "resilience.on_node_loss=replace"}));
  const Outcome no_spare = resolve({"resilience.on_node_loss=replace"});
  EXPECT_TRUE(no_spare.error_on("resilience.on_node_loss")) << no_spare.text();
  EXPECT_NE(no_spare.text().find("spare_nodes is 0"), std::string::npos) << no_spare.text();
  EXPECT_CLEAN(resolve({"job.nodes=2", "resilience.on_node_loss=shrink"}));
  EXPECT_ERROR_ON(resolve({"job.nodes=1", "resilience.on_node_loss=shrink"}),
                  "resilience.on_node_loss");
  EXPECT_CLEAN(
      resolve({"job.nodes=1", "resilience.spare_nodes=1", "resilience.on_node_loss=shrink"}));
  const Outcome unused = resolve({"resilience.spare_nodes=2", "resilience.on_node_loss=requeue"});
  EXPECT_TRUE(unused.clean()) << unused.text();
  EXPECT_TRUE(unused.warning_on("resilience.spare_nodes")) << unused.text();
  EXPECT_ERROR_ON(resolve({"resilience.on_node_loss=respawn"}), "resilience.on_node_loss");
  EXPECT_ERROR_ON(resolve({"resilience.heartbeat_timeout_s=1"}), "resilience.heartbeat_timeout_s");
  EXPECT_ERROR_ON(resolve({"job.extra_sbatch=[\"--no-kill\"]"}), "job.extra_sbatch");
}

TEST_F(CrossCheck, StragglerEvictionNeedsAnotherNodeAndIsWarnedWithoutASpare) {
  const Outcome spare =
      resolve({"job.nodes=2", "resilience.spare_nodes=1", "resilience.evict_stragglers=true",
               "resilience.straggler_windows=4"});
  EXPECT_TRUE(spare.clean() && spare.warnings.empty()) << spare.text();
  // No spare: an eviction costs a requeue (replace has none to use), or shrinks the world.
  const Outcome requeue = resolve({"job.nodes=2", "resilience.evict_stragglers=true"});
  EXPECT_TRUE(requeue.clean()) << requeue.text();
  EXPECT_TRUE(requeue.warning_on("resilience.evict_stragglers")) << requeue.text();
  const Outcome shrink = resolve(
      {"job.nodes=2", "resilience.on_node_loss=shrink", "resilience.evict_stragglers=true"});
  EXPECT_TRUE(shrink.clean() && shrink.warnings.empty()) << shrink.text();
  EXPECT_ERROR_ON(resolve({"job.nodes=1", "resilience.evict_stragglers=true"}),
                  "resilience.evict_stragglers");
  // The knobs without the switch do nothing.
  const Outcome off = resolve({"resilience.straggler_ratio=2.0"});
  EXPECT_TRUE(off.warning_on("resilience.straggler_ratio")) << off.text();
  EXPECT_ERROR_ON(resolve({"resilience.straggler_ratio=1.0"}), "resilience.straggler_ratio");
  EXPECT_ERROR_ON(resolve({"resilience.straggler_windows=0"}), "resilience.straggler_windows");
}

// resilience.stop_on takes the causes of a failure; the others have policies of their own.
TEST_F(CrossCheck, StopOnTakesTheCausesOfAFailure) {
  EXPECT_TRUE(resolve({R"(resilience.stop_on=["filesystem", "unknown", "oom"])"}).clean());
  EXPECT_TRUE(resolve({"resilience.stop_on=[]"}).clean());
  for (const char* cause : {"preempted", "node_lost", "completed", "OOM", "disk"}) {
    EXPECT_ERROR_ON(resolve({std::string("resilience.stop_on=[\"") + cause + "\"]"}),
                    "resilience.stop_on");
  }
}

TEST_F(CrossCheck, LocalSgdKeysWrittenWhereTheyDoNothingAreSaid) {
  const Outcome local = resolve({"train.sync=local_sgd", "train.sync_every_steps=8",
                                 "train.outer_optimizer=nesterov", "train.outer_lr=0.5"});
  EXPECT_TRUE(local.clean() && local.warnings.empty()) << local.text();
  // Without train.sync = "local_sgd" (a typo, or forgotten) none of them does anything.
  const Outcome forgotten = resolve({"train.sync_every_steps=8", "train.outer_optimizer=nesterov"});
  EXPECT_TRUE(forgotten.clean()) << forgotten.text();
  EXPECT_TRUE(forgotten.warning_on("train.sync_every_steps")) << forgotten.text();
  EXPECT_TRUE(forgotten.warning_on("train.outer_optimizer")) << forgotten.text();
  const Outcome plain = resolve({"train.sync=local_sgd", "train.outer_momentum=0.5"});
  EXPECT_TRUE(plain.warning_on("train.outer_momentum")) << plain.text();
  EXPECT_FALSE(plain.warning_on("train.sync")) << plain.text();
  EXPECT_ERROR_ON(resolve({"train.sync=local"}), "train.sync");
  EXPECT_ERROR_ON(resolve({"train.sync=local_sgd", "train.sync_every_steps=0"}),
                  "train.sync_every_steps");
}

TEST_F(CrossCheck, SignalLeavesMoreThanAMinuteOfTheTimeLimit) {
  // 300 s of lead + 60 s of training: the time limit must exceed 360 s.
  EXPECT_CLEAN(resolve({"preemption.signal_lead_s=300", "job.time=06:01"}));
  const Outcome at = resolve({"preemption.signal_lead_s=300", "job.time=06:00"});
  EXPECT_TRUE(at.error_on("preemption.signal_lead_s")) << at.text();
  EXPECT_NE(at.text().find("300 s before a time limit of 360 s"), std::string::npos) << at.text();
  EXPECT_CLEAN(resolve({"preemption.signal_lead_s=10", "job.time=01:11"}));
  EXPECT_ERROR_ON(resolve({"preemption.signal_lead_s=10", "job.time=01:10"}),
                  "preemption.signal_lead_s");
  // No signal without preemption.
  EXPECT_CLEAN(
      resolve({"preemption.enabled=false", "preemption.signal_lead_s=300", "job.time=06:00"}));
}

TEST_F(CrossCheck, TrainingDataOrSynthetic) {
  const std::string no_data = "[job]\nname = \"t\"\nrun_dir = \"/r\"\n";
  EXPECT_ERROR_ON(resolve({}, no_data), "data.train");
  EXPECT_ERROR_ON(resolve({"data.synthetic=false"}, no_data), "data.train");
  EXPECT_CLEAN(resolve({"data.train=train.h5"}, no_data));
  EXPECT_CLEAN(resolve({"data.synthetic=true"}, no_data));
}

TEST_F(CrossCheck, LoaderThreadsLeaveACoreForTraining) {
  const Outcome inside = resolve({"job.cpus_per_task=4", "data.workers=3"});
  EXPECT_TRUE(inside.clean() && !inside.warning_on("data.workers")) << inside.text();
  const Outcome outside = resolve({"job.cpus_per_task=4", "data.workers=4"});
  EXPECT_TRUE(outside.clean() && outside.warning_on("data.workers")) << outside.text();
  // One core per rank: nothing to leave, no warning.
  EXPECT_FALSE(resolve({"job.cpus_per_task=1", "data.workers=4"}).warning_on("data.workers"));
}

TEST_F(CrossCheck, SyntheticEpochHoldsAGlobalBatch) {
  // 2 nodes x 2 ranks x 8 samples = 32 samples per step.
  const std::vector<std::string> shape = {"job.nodes=2", "job.tasks_per_node=2",
                                          "train.batch_size=8"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), shape.begin(), shape.end());
    return more;
  };
  EXPECT_CLEAN(resolve(with({"data.synthetic_samples=32"})));
  const Outcome outside = resolve(with({"data.synthetic_samples=31"}));
  EXPECT_TRUE(outside.error_on("train.batch_size")) << outside.text();
  EXPECT_NE(outside.text().find("31 synthetic samples has no full global batch of 32"),
            std::string::npos)
      << outside.text();
  // A step limit needs no full epoch.
  EXPECT_CLEAN(resolve(with({"data.synthetic_samples=31", "train.max_steps=1"})));
}

TEST_F(CrossCheck, ContainerRuntimeNeedsAnImage) {
  for (const std::string runtime : {"pyxis", "apptainer"}) {
    EXPECT_ERROR_ON(resolve({"job.container.runtime=" + runtime}), "job.container.image");
    EXPECT_ERROR_ON(resolve({"job.container.runtime=" + runtime, R"(job.container.image="")"}),
                    "job.container.image");
    EXPECT_CLEAN(resolve({"job.container.runtime=" + runtime, "job.container.image=x.sif"}));
  }
  EXPECT_CLEAN(resolve({"job.container.runtime=none"}));
}

TEST_F(CrossCheck, ContainerMountsOnePerItem) {
  EXPECT_CLEAN(resolve({R"(job.container.mounts=["/a:/b", "/c"])"}));
  EXPECT_ERROR_ON(resolve({R"(job.container.mounts=["/a:/b,/c"])"}), "job.container.mounts");
  EXPECT_ERROR_ON(resolve({R"(job.container.mounts=[""])"}), "job.container.mounts");
}

TEST_F(CrossCheck, SrunMpiIsAPluginName) {
  EXPECT_CLEAN(resolve({"job.srun_mpi=pmix_v4"}));
  EXPECT_CLEAN(resolve({R"(job.srun_mpi="")"}));
  EXPECT_ERROR_ON(resolve({"job.srun_mpi=pmix-v4"}), "job.srun_mpi");
  EXPECT_ERROR_ON(resolve({"job.srun_mpi=PMIx"}), "job.srun_mpi");
}

TEST_F(CrossCheck, FusedBatchNormIsForTheResNets) {
  EXPECT_CLEAN(resolve({"model.fused_bn=true"}));
  EXPECT_CLEAN(resolve({"model.arch=resnet20", "model.fused_bn=true"}));
  EXPECT_ERROR_ON(resolve({"model.arch=alexnet", "model.fused_bn=true"}), "model.fused_bn");
  EXPECT_CLEAN(resolve({"model.arch=alexnet", "model.fused_bn=false"}));
}

TEST_F(CrossCheck, MultistepMilestonesStrictlyIncrease) {
  const std::string multistep = "train.schedule.name=multistep";
  EXPECT_CLEAN(resolve({multistep, "train.schedule.milestones=[10, 11]"}));
  EXPECT_ERROR_ON(resolve({multistep, "train.schedule.milestones=[10, 10]"}),
                  "train.schedule.milestones");
  EXPECT_ERROR_ON(resolve({multistep, "train.schedule.milestones=[]"}),
                  "train.schedule.milestones");
  EXPECT_CLEAN(resolve({"train.schedule.name=step", "train.schedule.milestones=[]"}));
}

TEST_F(CrossCheck, AdamWBetasAreTwoNumbersInTheUnitInterval) {
  const std::string adamw = "train.optimizer.name=adamw";
  EXPECT_CLEAN(resolve({adamw, "train.optimizer.betas=[0.0, 0.9999999999999999]"}));
  EXPECT_ERROR_ON(resolve({adamw, "train.optimizer.betas=[0.9, 1.0]"}), "train.optimizer.betas");
  EXPECT_ERROR_ON(resolve({adamw, "train.optimizer.betas=[-1e-300, 0.999]"}),
                  "train.optimizer.betas");
  EXPECT_ERROR_ON(resolve({adamw, "train.optimizer.betas=[0.9]"}), "train.optimizer.betas");
  EXPECT_ERROR_ON(resolve({adamw, "train.optimizer.betas=[0.9, 0.99, 0.999]"}),
                  "train.optimizer.betas");
}

TEST_F(CrossCheck, NoPeriodicCheckpointIsAWarning) {
  const Outcome off = resolve({"checkpoint.every_steps=0", "checkpoint.every_minutes=0"});
  EXPECT_TRUE(off.clean() && off.warning_on("checkpoint.every_steps")) << off.text();
  EXPECT_FALSE(resolve({"checkpoint.every_steps=0", "checkpoint.every_minutes=0.5"})
                   .warning_on("checkpoint.every_steps"));
  EXPECT_FALSE(resolve({"checkpoint.every_steps=1", "checkpoint.every_minutes=0"})
                   .warning_on("checkpoint.every_steps"));
}

TEST_F(CrossCheck, ExtraSbatchOptionsAreLongAndNotManaged) {
  EXPECT_CLEAN(resolve({R"(job.extra_sbatch=["--comment=x", "--hold"])"}));
  EXPECT_ERROR_ON(resolve({R"(job.extra_sbatch=["--time=5"])"}), "job.extra_sbatch");
  EXPECT_ERROR_ON(resolve({R"(job.extra_sbatch=["-t5"])"}), "job.extra_sbatch");
}

TEST_F(CrossCheck, EnvironmentNamesAreShellNamesAndNotReserved) {
  EXPECT_CLEAN(resolve({"job.env.SLURMISH=1", "job.env._x9=1"}));
  EXPECT_ERROR_ON(resolve({"job.env.SLURM_X=1"}), "job.env.SLURM_X");
  EXPECT_ERROR_ON(resolve({"job.env.9x=1"}), "job.env.9x");
}

TEST_F(CrossCheck, SubmitTimePathsMustExist) {
  const auto base = [&](const std::string& extra) {
    return "[job]\nname = \"t\"\nrun_dir = \"/r\"\nworker = \"w\"\n[data]\n"
           "train = \"data/a-*.h5\"\n" +
           extra;
  };
  write_text(dir_ / "w", "#!/bin/sh\n");
  ::chmod((dir_ / "w").c_str(), 0755);
  write_text(dir_ / "data" / "a-1.h5", "x");
  write_text(dir_ / "image.sif", "x");
  EXPECT_CLEAN(resolve({}, base(""), /*check_paths=*/true));
  EXPECT_ERROR_ON(resolve({}, base("val = \"data/v-*.h5\"\n"), true), "data.val");
  EXPECT_CLEAN(resolve({"job.container.runtime=apptainer", "job.container.image=image.sif"},
                       base(""), true));
  EXPECT_ERROR_ON(
      resolve({"job.container.runtime=apptainer", "job.container.image=other.sif"}, base(""), true),
      "job.container.image");
  EXPECT_CLEAN(resolve({"job.container.runtime=apptainer", "job.container.image=docker://x/y"},
                       base(""), true));
  ::chmod((dir_ / "w").c_str(), 0644);
  EXPECT_ERROR_ON(resolve({}, base(""), true), "job.worker");
  test::fs::remove(dir_ / "data" / "a-1.h5");
  ::chmod((dir_ / "w").c_str(), 0755);
  EXPECT_ERROR_ON(resolve({}, base(""), true), "data.train");
}

}  // namespace
}  // namespace hpctrain::spec
