#include "runtime/executor.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <random>

#include "common/error.h"
#include "profiler/kernels.h"

namespace ergon::runtime {
namespace {

using planner::ForwardOp;
using planner::kGraphInput;
namespace k = profiler;

using Buffer = std::vector<float>;

std::size_t elements(const std::vector<uint64_t>& shape) {
  std::size_t n = 1;
  for (uint64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

Buffer random_buffer(std::size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0F, scale);
  Buffer b(n);
  for (float& v : b) v = d(rng);
  return b;
}

class Executor {
 public:
  Executor(const planner::ForwardGraph& f, const planner::TrainingGraph& g,
           std::filesystem::path scratch, uint32_t seed)
      : f_(f), g_(g), n_(static_cast<int>(f.ops.size())), scratch_(std::move(scratch)) {
    if (f_.input_shape.empty())
      throw InputError(f_.name + " has no tensor shapes (only zoo models can be executed)");
    if (g_.size() != 2 * n_ + 1)
      throw InputError("the training graph does not belong to " + f_.name);
    data_ = random_buffer(elements(f_.input_shape), seed, 1.0F);
    const auto batch = static_cast<uint32_t>(f_.input_shape.front());
    const auto classes = static_cast<uint32_t>(f_.ops.back().shape.back());
    for (uint32_t b = 0; b < batch; ++b) labels_.push_back((b * 7 + seed) % classes);
    params_.resize(n_);
    grads_.resize(n_);
    for (int i = 0; i < n_; ++i) {
      const ForwardOp& op = f_.ops[i];
      check_supported(op);
      const std::size_t w = weight_count(i);
      if (w == 0) continue;
      // He-style scale keeps activations O(1) through a deep network.
      const double fan_in = static_cast<double>(w) / static_cast<double>(std::max<uint64_t>(out_channels(i), 1));
      params_[i] = random_buffer(w + bias_count(i), seed * 1000 + static_cast<uint32_t>(i),
                                 static_cast<float>(std::sqrt(2.0 / fan_in)));
      if (op.op == "batchnorm")  // gamma 1, beta 0, as initialized in PyTorch
        for (std::size_t c = 0; c < params_[i].size(); ++c) params_[i][c] = c < w ? 1.0F : 0.0F;
    }
    std::filesystem::create_directories(scratch_);
  }

  void set_parameters(const std::vector<Buffer>& params) {
    if (params.size() != params_.size())
      throw InputError("parameters for " + std::to_string(params.size()) + " ops, " + f_.name + " has " +
                       std::to_string(params_.size()));
    for (std::size_t i = 0; i < params.size(); ++i)
      if (params[i].size() != params_[i].size())
        throw InputError("op " + f_.ops[i].name + " has " + std::to_string(params_[i].size()) +
                         " parameters, not " + std::to_string(params[i].size()));
    params_ = params;
  }
  const std::vector<Buffer>& parameters() const { return params_; }

  ExecutionResult run(const planner::Schedule& s) {
    std::vector<char> computed(g_.size(), 0);
    for (std::size_t step = 0; step < s.steps.size(); ++step) {
      const planner::Step& st = s.steps[step];
      step_ = step;
      switch (st.kind) {
        case planner::StepKind::kCompute:
          compute(st.node);
          (computed[st.node] ? result_.recomputes : result_.computes) += 1;
          computed[st.node] = 1;
          break;
        case planner::StepKind::kFree:
          ram_.erase(st.node);
          break;
        case planner::StepKind::kPageOut: {
          const Buffer& b = need(st.node);
          std::ofstream(file(st.node), std::ios::binary)
              .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size() * 4));
          paged_size_[st.node] = b.size();
          result_.paged_out_bytes += b.size() * 4;
          break;
        }
        case planner::StepKind::kPageIn: {
          const auto size = paged_size_.find(st.node);
          if (size == paged_size_.end()) fail("pages in node " + std::to_string(st.node) + ", never paged out");
          Buffer b(size->second);
          std::ifstream(file(st.node), std::ios::binary)
              .read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(b.size() * 4));
          result_.paged_in_bytes += b.size() * 4;
          ram_[st.node] = std::move(b);
          break;
        }
      }
      std::size_t held = 0;
      for (const auto& [node, b] : ram_) held += b.size() * 4;
      result_.peak_bytes = std::max<uint64_t>(result_.peak_bytes, held);
    }
    result_.parameter_grads = grads_;
    for (const auto& [node, size] : paged_size_) std::filesystem::remove(file(node));
    return result_;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw DeviceError("schedule step " + std::to_string(step_) + " " + why);
  }

  static void check_supported(const ForwardOp& op) {
    static const char* const kOps[] = {"conv2d", "batchnorm", "relu", "add", "maxpool", "avgpool", "linear"};
    if (std::none_of(std::begin(kOps), std::end(kOps), [&](const char* o) { return op.op == o; }))
      throw InputError("op " + op.name + " (" + op.op + ") cannot be executed yet");
    if (op.op == "conv2d" && (op.groups != 1 || op.padding != op.kernel / 2))
      throw InputError("op " + op.name + ": grouped or unusually padded convolution cannot be executed yet");
    if (op.op == "maxpool" && (op.kernel != op.stride || op.padding != 0))
      throw InputError("op " + op.name + ": overlapping max pooling cannot be executed yet");
  }

  std::vector<uint64_t> in_shape(int i, std::size_t k = 0) const {
    const int in = f_.ops[i].inputs[k];
    return in == kGraphInput ? f_.input_shape : f_.ops[in].shape;
  }
  uint64_t out_channels(int i) const { return f_.ops[i].shape.size() > 1 ? f_.ops[i].shape[1] : 1; }
  std::size_t weight_count(int i) const {
    const ForwardOp& op = f_.ops[i];
    if (op.op == "conv2d") return static_cast<std::size_t>(op.shape[1] * in_shape(i)[1] * op.kernel * op.kernel);
    if (op.op == "linear") return static_cast<std::size_t>(op.shape.back() * in_shape(i).back());
    if (op.op == "batchnorm") return static_cast<std::size_t>(op.shape[1]);  // gamma
    return 0;
  }
  std::size_t bias_count(int i) const {
    const ForwardOp& op = f_.ops[i];
    if (op.op == "batchnorm") return static_cast<std::size_t>(op.shape[1]);  // beta
    if (!op.bias) return 0;
    return static_cast<std::size_t>(op.op == "linear" ? op.shape.back() : op.shape[1]);
  }

  std::filesystem::path file(int node) const { return scratch_ / ("node-" + std::to_string(node) + ".bin"); }

  const Buffer& need(int node) const {
    const auto it = ram_.find(node);
    if (it == ram_.end())
      fail("needs the output of node " + std::to_string(node) + " (" + g_.nodes[node].name +
           "), which is not in memory");
    return it->second;
  }
  const Buffer& input_of(int i, std::size_t k) const {
    const int in = f_.ops[i].inputs[k];
    return in == kGraphInput ? data_ : need(in);
  }

  void compute(int node) {
    if (node < n_) return ram_[node] = forward(node), void();
    if (node == n_) {
      const Buffer& logits = need(n_ - 1);
      const auto& shape = f_.ops[n_ - 1].shape;
      Buffer d(logits.size());
      result_.loss = k::softmax_cross_entropy(static_cast<uint32_t>(shape.front()),
                                              static_cast<uint32_t>(shape.back()), logits, labels_, d);
      ram_[node] = std::move(d);
      return;
    }
    ram_[node] = backward(2 * n_ - node);
  }

  Buffer forward(int i) {
    const ForwardOp& op = f_.ops[i];
    const auto in = in_shape(i);
    const Buffer& x = input_of(i, 0);
    Buffer y(elements(op.shape));
    const auto u = [](uint64_t v) { return static_cast<uint32_t>(v); };
    if (op.op == "conv2d") {
      const k::ConvShape s{u(in[0]), u(in[1]), u(op.shape[1]), u(in[2]), u(in[3]), u(op.kernel), u(op.stride)};
      Buffer cols(s.columns_size());
      k::conv2d_forward(s, x, params_[i], y, cols);
      add_bias(i, y);
    } else if (op.op == "linear") {
      const uint32_t batch = u(elements(in) / in.back());
      k::linear_forward(batch, u(in.back()), u(op.shape.back()), x, params_[i], y);
      add_bias(i, y);
    } else if (op.op == "batchnorm") {
      const uint32_t c = u(in[1]);
      Buffer saved(2 * c);
      k::batch_norm_forward(u(in[0]), c, u(elements(in) / in[0] / c), x,
                            std::span<const float>(params_[i]).first(c),
                            std::span<const float>(params_[i]).subspan(c), y, saved);
    } else if (op.op == "relu") {
      k::relu_forward(x, y);
    } else if (op.op == "add") {
      k::add_forward(x, input_of(i, 1), y);
    } else if (op.op == "maxpool") {
      k::max_pool_forward(u(in[0]), u(in[1]), u(in[2]), u(in[3]), u(op.kernel), x, y);
    } else if (op.op == "avgpool") {
      k::global_avg_pool_forward(u(in[0]), u(in[1]), u(in[2] * in[3]), x, y);
    }
    return y;
  }

  void add_bias(int i, Buffer& y) const {
    const ForwardOp& op = f_.ops[i];
    if (!op.bias) return;
    const std::size_t w = weight_count(i);
    const std::size_t channels = op.op == "linear" ? op.shape.back() : op.shape[1];
    const std::size_t inner = op.op == "linear" ? 1 : static_cast<std::size_t>(op.shape[2] * op.shape[3]);
    for (std::size_t j = 0; j < y.size(); ++j) y[j] += params_[i][w + (j / inner) % channels];
  }

  /// dL/d(output of op i): the loss's output, or the sum of each consumer's input gradient.
  Buffer output_gradient(int i) const {
    if (i == n_ - 1) return need(n_);
    Buffer dy(elements(f_.ops[i].shape), 0.0F);
    for (int c = i + 1; c < n_; ++c) {
      const auto& ins = f_.ops[c].inputs;
      std::size_t offset = 0;
      for (std::size_t k2 = 0; k2 < ins.size(); ++k2) {
        const std::size_t size = elements(in_shape(c, k2));
        if (ins[k2] == i) {
          const Buffer& g = need(2 * n_ - c);
          for (std::size_t j = 0; j < size; ++j) dy[j] += g[offset + j];
        }
        offset += size;
      }
    }
    return dy;
  }

  Buffer backward(int i) {
    const ForwardOp& op = f_.ops[i];
    const auto in = in_shape(i);
    const bool data_only = std::all_of(op.inputs.begin(), op.inputs.end(), [](int v) { return v == kGraphInput; });
    const Buffer dy = output_gradient(i);
    std::size_t in_total = 0;
    for (std::size_t k2 = 0; k2 < op.inputs.size(); ++k2) in_total += elements(in_shape(i, k2));
    Buffer dx(data_only ? 0 : in_total);
    Buffer scratch_dx(elements(in));  // the data batch's gradient is computed, then dropped
    std::span<float> dxs = data_only ? std::span<float>(scratch_dx) : std::span<float>(dx);
    const auto u = [](uint64_t v) { return static_cast<uint32_t>(v); };
    if (op.op == "conv2d" || op.op == "linear" || op.op == "batchnorm") grads_[i].assign(params_[i].size(), 0.0F);
    const std::size_t w = weight_count(i);
    if (op.op == "conv2d") {
      const k::ConvShape s{u(in[0]), u(in[1]), u(op.shape[1]), u(in[2]), u(in[3]), u(op.kernel), u(op.stride)};
      Buffer cols(s.columns_size());
      k::conv2d_backward(s, input_of(i, 0), params_[i], dy, dxs, std::span<float>(grads_[i]).first(w), cols);
      bias_gradient(i, dy);
    } else if (op.op == "linear") {
      const uint32_t batch = u(elements(in) / in.back());
      k::linear_backward(batch, u(in.back()), u(op.shape.back()), input_of(i, 0), params_[i], dy, dxs,
                         std::span<float>(grads_[i]).first(w));
      bias_gradient(i, dy);
    } else if (op.op == "batchnorm") {
      const uint32_t c = u(in[1]), px = u(elements(in) / in[0] / c);
      Buffer saved(2 * c), y(elements(in));
      const Buffer& x = input_of(i, 0);
      const std::span<const float> gamma = std::span<const float>(params_[i]).first(c);
      k::batch_norm_forward(u(in[0]), c, px, x, gamma, std::span<const float>(params_[i]).subspan(c), y, saved);
      k::batch_norm_backward(u(in[0]), c, px, x, gamma, saved, dy, dxs,
                             std::span<float>(grads_[i]).first(c), std::span<float>(grads_[i]).subspan(c));
    } else if (op.op == "relu") {
      k::relu_backward(need(i), dy, dxs);
    } else if (op.op == "add") {
      const std::size_t half = elements(in_shape(i, 0));
      k::add_backward(dy, dxs.first(half), dxs.subspan(half));
    } else if (op.op == "maxpool") {
      k::max_pool_backward(u(in[0]), u(in[1]), u(in[2]), u(in[3]), u(op.kernel), input_of(i, 0), dy, dxs);
    } else if (op.op == "avgpool") {
      k::global_avg_pool_backward(u(in[0]), u(in[1]), u(in[2] * in[3]), dy, dxs);
    }
    return dx;
  }

  void bias_gradient(int i, const Buffer& dy) {
    const ForwardOp& op = f_.ops[i];
    if (!op.bias) return;
    const std::size_t w = weight_count(i);
    const std::size_t channels = op.op == "linear" ? op.shape.back() : op.shape[1];
    const std::size_t inner = op.op == "linear" ? 1 : static_cast<std::size_t>(op.shape[2] * op.shape[3]);
    for (std::size_t j = 0; j < dy.size(); ++j) grads_[i][w + (j / inner) % channels] += dy[j];
  }

  const planner::ForwardGraph& f_;
  const planner::TrainingGraph& g_;
  int n_;
  std::filesystem::path scratch_;
  Buffer data_;
  std::vector<uint32_t> labels_;
  std::vector<Buffer> params_, grads_;
  std::map<int, Buffer> ram_;
  std::map<int, std::size_t> paged_size_;
  std::size_t step_ = 0;
  ExecutionResult result_;
};

}  // namespace

ExecutionResult execute(const planner::ForwardGraph& forward, const planner::TrainingGraph& graph,
                        const planner::Schedule& schedule, const std::filesystem::path& scratch,
                        uint32_t seed, const std::vector<std::vector<float>>* parameters) {
  Executor e(forward, graph, scratch, seed);
  if (parameters != nullptr) e.set_parameters(*parameters);
  return e.run(schedule);
}

std::vector<std::vector<float>> initial_parameters(const planner::ForwardGraph& forward,
                                                   const planner::TrainingGraph& graph,
                                                   uint32_t seed) {
  return Executor(forward, graph, std::filesystem::temp_directory_path(), seed).parameters();
}

}  // namespace ergon::runtime
