#include "train/step_graphs.hpp"

#include <ATen/autocast_mode.h>

#include <optional>
#include <utility>

#ifdef HPCTRAIN_WITH_NCCL
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/cuda/Exceptions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "common/error.hpp"
#include "train/host_reads.hpp"

namespace hpctrain::train {
namespace {

// Autocast's cache of cast weights off for a scope (a graph must not keep a cast made before it,
// and the twin does as the graph does).
class NoAutocastCache {
 public:
  NoAutocastCache() : previous_(at::autocast::is_autocast_cache_enabled()) {
    at::autocast::set_autocast_cache_enabled(false);
  }
  ~NoAutocastCache() { at::autocast::set_autocast_cache_enabled(previous_); }
  NoAutocastCache(const NoAutocastCache&) = delete;
  NoAutocastCache& operator=(const NoAutocastCache&) = delete;

 private:
  bool previous_;
};

void run_eagerly(const std::string& name, const std::function<void(bool)>& body) {
  NoAutocastCache no_cache;
  HostReadGuard guard;
  body(false);
  guard.check("the static step's segment '" + name + "'");
}

}  // namespace

#ifdef HPCTRAIN_WITH_NCCL
struct StepGraphs::Cuda {
  explicit Cuda(c10::DeviceIndex index)
      : side(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index)) {}
  c10::cuda::CUDAStream side;
  std::optional<c10::cuda::CUDAStream> caller;  // the stream the step began on
  std::optional<c10::cuda::CUDAStreamGuard> on_side;
  std::optional<at::cuda::MempoolId_t> pool;
  std::vector<std::unique_ptr<at::cuda::CUDAGraph>> graphs;
};
#else
struct StepGraphs::Cuda {};
#endif

StepGraphs::StepGraphs(const at::Device& device, std::vector<std::string> names, bool capture,
                       int warmup_steps)
    : device_(device),
      names_(std::move(names)),
      capture_(capture && device.is_cuda()),
      warmup_steps_(warmup_steps),
      warmup_left_(warmup_steps) {
  if (capture_) {
#ifdef HPCTRAIN_WITH_NCCL
    cuda_ = std::make_unique<Cuda>(device.index());
    cuda_->graphs.resize(names_.size());
#else
    HPCTRAIN_THROW(rt::Error, "CUDA graphs in a build without CUDA");
#endif
  }
}

StepGraphs::~StepGraphs() = default;

void StepGraphs::set_static_shapes(bool static_shapes) {
  phase_ = Phase::kEager;
  warming_ = false;
  if (!capture_ || !static_shapes) return;  // an odd step runs eagerly, off the graphs
#ifdef HPCTRAIN_WITH_NCCL
  if (warmup_left_ > 0) {
    warming_ = true;
  } else {
    phase_ = cuda_->graphs.front() ? Phase::kReplay : Phase::kCapture;
  }
#endif
}

void StepGraphs::begin_step() {
  phase_ = Phase::kEager;
  warming_ = false;
  if (!capture_) return;
#ifdef HPCTRAIN_WITH_NCCL
  // Warm-up and capture on a side stream, as torch's graph capture wants; the replays and the
  // eager work between them follow it there, after everything queued before the step.
  const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(device_.index());
  at::cuda::CUDAEvent ready;
  ready.record(caller);
  ready.block(cuda_->side);
  cuda_->caller = caller;
  cuda_->on_side.emplace(cuda_->side);
#endif
}

void StepGraphs::run(size_t i, const std::function<void(bool)>& body) {
  if (phase_ == Phase::kEager) {
    run_eagerly(names_.at(i), body);
    return;
  }
#ifdef HPCTRAIN_WITH_NCCL
  auto& graph = cuda_->graphs.at(i);
  if (phase_ == Phase::kCapture) {
    NoAutocastCache no_cache;
    // Kept after capture: its nodes are counted (the kernels, copies and memsets a replay
    // launches), then it is instantiated.
    graph = std::make_unique<at::cuda::CUDAGraph>(/*keep_graph=*/true);
    graph->capture_begin(cuda_->pool.value_or(at::cuda::MempoolId_t{0, 0}),
                         cudaStreamCaptureModeThreadLocal);
    try {
      body(true);
    } catch (...) {
      try {
        graph->capture_end();
      } catch (...) {
      }
      graph.reset();
      throw;
    }
    graph->capture_end();
    size_t nodes = 0;
    AT_CUDA_CHECK(cudaGraphGetNodes(graph->raw_cuda_graph(), nullptr, &nodes));
    nodes_ += static_cast<int64_t>(nodes);
    graph->instantiate();
    if (!cuda_->pool) cuda_->pool = graph->pool();
    ++captures_;
  }
  graph->replay();  // capturing ran nothing: the step's work is the first replay
  ++replays_;
#endif
}

void StepGraphs::end_step() {
  if (warming_) --warmup_left_;
#ifdef HPCTRAIN_WITH_NCCL
  if (cuda_ && cuda_->caller) {
    at::cuda::CUDAEvent done;
    done.record(cuda_->side);
    cuda_->on_side.reset();
    done.block(*cuda_->caller);
    cuda_->caller.reset();
  }
#endif
  phase_ = Phase::kEager;
  warming_ = false;
}

void StepGraphs::recapture() {
  warmup_left_ = warmup_steps_;
  nodes_ = 0;
#ifdef HPCTRAIN_WITH_NCCL
  if (cuda_) {
    for (auto& g : cuda_->graphs) g.reset();
    cuda_->pool.reset();
  }
#endif
}

}  // namespace hpctrain::train
