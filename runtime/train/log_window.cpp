#include "train/log_window.hpp"

#include <ATen/ATen.h>

#include <algorithm>

namespace hpctrain::train {

LogWindow::LogWindow(dist::Communicator& comm)
    : comm_(comm),
      loss_(at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(comm.device()))),
      start_(Clock::now()) {}

void LogWindow::start() { start_ = Clock::now(); }

void LogWindow::discard() {
  loss_.zero_();
  busy_.clear();
  start_ = Clock::now();
}

void LogWindow::add_step(const at::Tensor& loss, double busy_s) {
  loss_ += loss.detach().to(at::kDouble);
  busy_.push_back(busy_s);
}

std::pair<double, double> LogWindow::busy_percentiles() const {
  if (busy_.empty()) return {0, 0};
  std::vector<double> v = busy_;
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  return {at(0.5), at(0.95)};
}

bool LogWindow::finite_so_far() {
  at::Tensor flag = at::isfinite(loss_).logical_not().to(at::kDouble);
  comm_.all_reduce(flag);
  return flag.cpu().item<double>() == 0;
}

WindowFigures LogWindow::close(int64_t step) {
  // One all-reduce: the loss summed over the window and the ranks, and every rank's busy time
  // per step (its p50 and p95 over the window) in its own slots.
  const int64_t world = comm_.size(), rank = comm_.rank();
  const auto [p50, p95] = busy_percentiles();
  at::Tensor gathered =
      at::zeros({1 + 2 * world}, at::TensorOptions().dtype(at::kDouble).device(comm_.device()));
  gathered.narrow(0, 0, 1).copy_(loss_);
  gathered.narrow(0, 1 + rank, 1).fill_(p50);
  gathered.narrow(0, 1 + world + rank, 1).fill_(p95);
  comm_.all_reduce(gathered);
  const at::Tensor host = gathered.cpu();
  const double* all = host.data_ptr<double>();
  WindowFigures f;
  f.steps = static_cast<int64_t>(busy_.size());
  f.first_step = step - f.steps + 1;
  f.mean_loss = all[0] / static_cast<double>(f.steps * world);
  f.seconds = seconds_since(start_);
  f.busy_p50.assign(all + 1, all + 1 + world);
  f.busy_p95.assign(all + 1 + world, all + 1 + 2 * world);
  loss_.zero_();
  busy_.clear();
  start_ = Clock::now();
  return f;
}

}  // namespace hpctrain::train
