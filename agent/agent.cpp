#include "agent/agent.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "devices/board_profile.h"
#include "devices/link_server.h"
#include "devices/power_control.h"
#include "devices/profile_plan.h"
#include "devices/protocol/decoder.h"
#include "devices/protocol/messages.h"
#include "planner/pipeline.h"
#include "planner/zoo.h"
#include "probes/probe.h"
#include "profiler/op_runner.h"
#include "runtime/executor.h"

namespace ergon::agent {
// The agent is made of the devices module's parts: its protocol, links and power controls.
using namespace ergon::devices;  // NOLINT(google-build-using-namespace): this file only

namespace {

namespace proto = devices::protocol;

/// The clock of every timestamp the agent sends: CLOCK_MONOTONIC, in ns (tick_hz 1e9).
const SteadyClock& agent_clock() {
  static const SteadyClock clock;
  return clock;
}
uint64_t now_ticks() { return static_cast<uint64_t>(agent_clock().now_ns()); }

/// The board's power-mode control: a Jetson's nvpmodel where its configuration exists, else
/// cpufreq's ceiling; names match the simulated boards' ("MAXN", "1500MHz").
std::unique_ptr<PowerModeControl> power_control(const AgentOptions& options) {
  if (std::filesystem::exists(options.nvpmodel_conf))
    return nvpmodel_control(system_command_runner(), options.nvpmodel_conf);
  return cpufreq_control(options.sysfs_root);
}

/// The mode the board runs in; empty where the board cannot tell.
std::string current_power_mode(const AgentOptions& options) {
  try {
    return power_control(options)->state().current;
  } catch (const Error&) {
    return {};
  }
}

/// Sets a power mode for the host (SetPowerMode): the answer says what the board runs in
/// afterwards and how long the switch took.
proto::PowerModeSet set_power_mode(const AgentOptions& options, const std::string& mode) {
  proto::PowerModeSet answer;
  auto fail = [&](proto::PowerModeStatus status, const std::string& why) {
    answer.status = status;
    proto::copy_text(answer.detail, why.c_str());
  };
  try {
    auto control = power_control(options);
    const ModeState before = control->state();
    if (before.current != mode) {
      const auto t0 = std::chrono::steady_clock::now();
      control->set(mode, false);
      answer.switch_ns = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    }
  } catch (const InputError& e) {
    fail(proto::PowerModeStatus::kUnknownMode, e.what());
  } catch (const DeviceError& e) {
    const std::string why = e.what();
    const bool refused = why.find("Permission denied") != std::string::npos ||
                         why.find("Operation not permitted") != std::string::npos;
    fail(refused ? proto::PowerModeStatus::kRefused : proto::PowerModeStatus::kFailed, why);
  }
  proto::copy_text(answer.mode, current_power_mode(options).c_str());
  return answer;
}

/// One connection to a host: the frames it sends, the frames the agent sends (from several
/// threads, so every send holds the lock).
class Connection {
 public:
  explicit Connection(int fd) : fd_(fd) {}
  ~Connection() { ::close(fd_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  template <class Msg>
  bool send(const Msg& msg) {
    uint8_t buf[proto::kMaxEncodedFrameBytes];
    std::lock_guard lock(tx_);
    const std::size_t n = proto::encode_message(msg, seq_++, buf, sizeof buf);
    for (std::size_t done = 0; n != 0 && done < n;) {
      const ssize_t w = ::write(fd_, buf + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        broken_ = true;
        return false;
      }
      done += static_cast<std::size_t>(w);
    }
    return true;
  }
  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] bool broken() const { return broken_; }
  void mark_broken() { broken_ = true; }

 private:
  int fd_;
  std::mutex tx_;
  uint16_t seq_ = 0;
  std::atomic<bool> broken_{false};
};

/// What the reader thread hands the runner: a plan to start, a stop.
struct Commands {
  std::mutex m;
  std::condition_variable cv;
  std::vector<PlannedOp> pending;
  std::optional<proto::Start> start;
  bool stop = false;
  /// What a Start in mode kExecute runs: the model, and the schedule's steps as they arrive.
  std::optional<proto::ExecuteModel> model;
  std::vector<planner::Step> steps;
  std::vector<std::pair<uint8_t, uint32_t>> raw_steps;  ///< as sent (a pipeline stage's kinds 4 and 5 too)
  std::vector<char> step_received;
  std::optional<proto::ExecuteStage> stage;  ///< the model is a pipeline's stage (v6)
  /// Per-phase modes for the next Start (PhaseModes).
  std::optional<proto::PhaseModes> phases;
  /// Link transfers (protocol v6): the last transfer the host acknowledged whole, and the
  /// HostLinkData of the transfer arriving now.
  uint32_t acked_transfer = 0;
  uint32_t rx_transfer = 0;
  uint64_t rx_bytes = 0;
  uint32_t rx_done = 0;  ///< the last transfer whose last frame arrived
  std::vector<uint8_t> rx_data;  ///< the bytes of rx_transfer so far
};

/// The schedule a Start in mode kExecute runs.
struct Execution {
  std::optional<proto::ExecuteModel> model;
  std::vector<planner::Step> steps;
  std::vector<std::pair<uint8_t, uint32_t>> raw_steps;
  std::optional<proto::ExecuteStage> stage;
  bool complete = false;  ///< every step arrived
};

using runtime::gradient_digest;

class Agent {
 public:
  Agent(const AgentOptions& options, const std::atomic<bool>& stop)
      : options_(options), stop_(stop), runner_(options.scratch) {
    // Without --board the agent is a Linux host: no profile, its costs only what it measures.
    if (!options.board.empty()) {
      const BoardProfile board = board_named(options.board);
      kind_ = board.kind;
      board_type_ = board.name;
    }
    if (!options.probe.empty() && options.probe != kNoProbe)
      probe_ = probes::open_probe(probes::parse_probe_spec(options.probe), 0, agent_clock());
  }

  /// Serves one host until it goes away or the agent is stopped.
  void serve(int fd) {
    Connection link(fd);
    Commands commands;
    std::thread reader([&] { read_loop(link, commands); });
    while (!stop_ && !link.broken()) {
      proto::Start start;
      std::vector<PlannedOp> plan;
      Execution execution;
      std::optional<proto::PhaseModes> phases;
      {
        std::unique_lock lock(commands.m);
        commands.cv.wait_for(lock, std::chrono::milliseconds(50),
                             [&] { return commands.start.has_value() || link.broken(); });
        if (!commands.start) continue;
        start = *commands.start;
        commands.start.reset();
        plan = std::move(commands.pending);
        commands.pending.clear();
        phases = std::exchange(commands.phases, std::nullopt);
        commands.stop = false;
        running_ = true;  // from the moment the start is taken: no mode switch slips in
        if (start.mode == proto::StartMode::kExecute) {
          execution.model = commands.model;
          execution.complete = std::all_of(commands.step_received.begin(), commands.step_received.end(),
                                           [](char c) { return c != 0; });
          execution.steps = std::move(commands.steps);
          execution.raw_steps = std::move(commands.raw_steps);
          execution.stage = std::exchange(commands.stage, std::nullopt);
          commands.model.reset();
          commands.steps.clear();
          commands.raw_steps.clear();
          commands.step_received.clear();
        }
      }
      run_plan(link, commands, start, plan, execution, phases);
    }
    link.mark_broken();
    reader.join();
  }

 private:
  void read_loop(Connection& link, Commands& commands) {
    proto::Decoder decoder;
    uint8_t buf[4096];
    while (!stop_ && !link.broken()) {
      pollfd p{link.fd(), POLLIN, 0};
      const int ready = ::poll(&p, 1, 50);
      if (ready < 0 && errno != EINTR) break;
      if (ready <= 0) continue;
      const ssize_t n = ::read(link.fd(), buf, sizeof buf);
      if (n <= 0) {
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        break;  // the host went away
      }
      decoder.feed(buf, static_cast<std::size_t>(n),
                   [&](const proto::Frame& f) { handle(link, commands, f); });
    }
    {
      std::lock_guard lock(commands.m);  // a waiter checks broken() under the lock: no lost wakeup
      link.mark_broken();
    }
    commands.cv.notify_all();
  }

  // Answers what needs no waiting here, at once (sync replies must not wait for a window);
  // plans and stops go to the runner.
  void handle(Connection& link, Commands& commands, const proto::Frame& frame) {
    switch (frame.type) {
      case proto::MsgType::kHelloRequest: {
        proto::Hello hello;
        hello.board_kind = kind_;
        hello.firmware_version = 1U << 16;
        hello.tick_hz = 1'000'000'000;
        const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
        hello.ram_bytes = static_cast<uint32_t>(std::min<long long>(
            static_cast<long long>(pages) * page, UINT32_MAX));
        char host[64] = {};
        ::gethostname(host, sizeof host - 1);
        proto::copy_text(hello.board_name, host);
        proto::copy_text(hello.board_type, board_type_.c_str());
        proto::copy_text(hello.power_mode, current_power_mode(options_).c_str());
        if (probe_) {
          const auto& channels = probe_->info().channels;
          hello.rail_count = static_cast<uint8_t>(std::min<std::size_t>(channels.size(), proto::kMaxRails));
          for (uint8_t i = 0; i < hello.rail_count; ++i) {
            hello.rails[i].id = channels[i].id;
            proto::copy_text(hello.rails[i].name, channels[i].name.c_str());
          }
        }
        link.send(hello);
        return;
      }
      case proto::MsgType::kSyncRequest: {
        const uint64_t rx = now_ticks();
        proto::SyncRequest req;
        if (!proto::parse_message(frame, req)) return;
        link.send(proto::SyncReply{.sync_id = req.sync_id,
                                   .host_tx_ns = req.host_tx_ns,
                                   .device_rx_ticks = rx,
                                   .device_tx_ticks = now_ticks()});
        return;
      }
      case proto::MsgType::kPing: {
        proto::Ping ping;
        if (proto::parse_message(frame, ping))
          link.send(proto::Pong{.nonce = ping.nonce, .device_ticks = now_ticks()});
        return;
      }
      case proto::MsgType::kPlanOp: {
        proto::PlanOp wire;
        PlannedOp op;
        if (!proto::parse_message(frame, wire) || !from_wire(wire, op)) return;
        std::lock_guard lock(commands.m);
        commands.pending.push_back(op);
        return;
      }
      case proto::MsgType::kExecuteModel: {
        proto::ExecuteModel m;
        if (!proto::parse_message(frame, m)) return;
        std::lock_guard lock(commands.m);
        if (running_) return;
        commands.model = m;
        commands.steps.assign(m.step_count, planner::Step{});
        commands.raw_steps.assign(m.step_count, {});
        commands.step_received.assign(m.step_count, 0);
        commands.stage.reset();
        return;
      }
      case proto::MsgType::kExecuteStage: {
        proto::ExecuteStage st;
        if (!proto::parse_message(frame, st)) return;
        std::lock_guard lock(commands.m);
        if (!running_) commands.stage = st;
        return;
      }
      case proto::MsgType::kScheduleSteps: {
        static thread_local proto::ScheduleSteps chunk;
        if (!proto::parse_message(frame, chunk)) return;
        std::lock_guard lock(commands.m);
        for (uint8_t i = 0; i < chunk.count; ++i) {
          const std::size_t at = std::size_t{chunk.first} + i;
          if (at >= commands.steps.size()) break;  // beyond what ExecuteModel announced
          commands.steps[at] = planner::Step{static_cast<planner::StepKind>(chunk.steps[i].kind > 3 ? 0 : chunk.steps[i].kind),
                                             static_cast<int>(chunk.steps[i].node)};
          commands.raw_steps[at] = {chunk.steps[i].kind, chunk.steps[i].node};
          // Transfers (kinds 4 and 5) belong to a pipeline stage: without an ExecuteStage the
          // step counts as missing, and the run is refused.
          commands.step_received[at] = chunk.steps[i].kind > 3 && !commands.stage ? 0 : 1;
        }
        return;
      }
      case proto::MsgType::kStart: {
        proto::Start start;
        if (!proto::parse_message(frame, start)) return;
        {
          std::lock_guard lock(commands.m);
          if (running_) return;  // one run at a time
          commands.start = start;
        }
        commands.cv.notify_all();
        return;
      }
      case proto::MsgType::kPhaseModes: {
        proto::PhaseModes phases;
        if (!proto::parse_message(frame, phases)) return;
        std::lock_guard lock(commands.m);
        if (!running_) commands.phases = phases;
        return;
      }
      case proto::MsgType::kSetPowerMode: {
        proto::SetPowerMode request;
        if (!proto::parse_message(frame, request)) return;
        std::unique_lock lock(commands.m);
        if (running_ || commands.start) {
          lock.unlock();
          proto::PowerModeSet busy{.status = proto::PowerModeStatus::kBusy};
          proto::copy_text(busy.mode, current_power_mode(options_).c_str());
          proto::copy_text(busy.detail, "a run is in progress; change modes between runs");
          link.send(busy);
          return;
        }
        // Held while switching, so a Start waits for the new mode.
        link.send(set_power_mode(options_, request.mode));
        return;
      }
      case proto::MsgType::kLinkAck: {
        proto::LinkAck ack;
        if (!proto::parse_message(frame, ack)) return;
        {
          std::lock_guard lock(commands.m);
          commands.acked_transfer = ack.transfer;
        }
        commands.cv.notify_all();
        return;
      }
      case proto::MsgType::kHostLinkData: {
        static thread_local proto::HostLinkData data;
        if (!proto::parse_message(frame, data)) return;
        {
          std::lock_guard lock(commands.m);
          if (data.transfer != commands.rx_transfer) {
            commands.rx_transfer = data.transfer;
            commands.rx_bytes = 0;
            commands.rx_data.clear();
          }
          commands.rx_bytes += data.length;
          commands.rx_data.insert(commands.rx_data.end(), data.data, data.data + data.length);
          if (data.last) commands.rx_done = data.transfer;
        }
        if (data.last) commands.cv.notify_all();
        return;
      }
      case proto::MsgType::kStop: {
        std::lock_guard lock(commands.m);
        commands.stop = true;
        commands.cv.notify_all();  // a transfer waiting for the host gives up
        if (!running_ && last_done_) link.send(*last_done_);  // the host missed it
        return;
      }
      default:
        return;
    }
  }

  void run_plan(Connection& link, Commands& commands, const proto::Start& start,
                const std::vector<PlannedOp>& plan, const Execution& execution,
                const std::optional<proto::PhaseModes>& phases) {
    proto::RunDone done{.run_tag = start.run_tag};
    if (plan.empty() || plan.size() != start.op_count) {
      done.end = proto::RunEnd::kFailed;
      {
        std::lock_guard lock(commands.m);
        running_ = false;
      }
      link.send(done);
      return;
    }
    {
      std::lock_guard lock(commands.m);
      running_ = true;
    }
    std::atomic<bool> sampling{true};
    std::atomic<uint32_t> samples{0}, frames{0};
    std::thread sampler;
    if (probe_) {
      probe_->start();
      sampler = std::thread([&] { sample_loop(link, sampling, samples, frames); });
    }
    auto stopped = [&] {
      std::lock_guard lock(commands.m);
      return commands.stop || stop_ || link.broken();
    };
    Outcome outcome;
    const bool execute = start.mode == proto::StartMode::kExecute;
    // Per-phase modes: switch before entry switch_at, and back to this mode after the run.
    const std::string started_in = phases ? current_power_mode(options_) : std::string();
    bool switched = false;
    auto before_entry = [&](std::size_t entry) {
      if (!phases || switched || entry < phases->switch_at) return;
      switched = true;
      const proto::PowerModeSet set = set_power_mode(options_, phases->backward);
      if (set.status != proto::PowerModeStatus::kOk)
        throw DeviceError(std::string("cannot switch to ") + phases->backward + " for the backward phase: " + set.detail);
      log(link, proto::LogLevel::kInfo, phase_switch_line(entry, phases->backward, set.switch_ns));
    };
    try {
      outcome = execute && execution.stage ? execute_stage(link, commands, start, plan, execution, stopped)
                : execute             ? execute_schedule(link, start, plan, execution, stopped, before_entry)
                                      : time_windows(link, commands, start, plan, stopped, outcome, before_entry);
    } catch (const Error& e) {
      // A plan the board cannot run (an op without its dimensions, a full disk): the run
      // fails with the reason, and the agent waits for the next one.
      log(link, proto::LogLevel::kError, std::string(execute ? "execute: " : "run: ") + e.what());
      outcome.failed = true;
    }
    if (switched && !started_in.empty()) {
      const proto::PowerModeSet back = set_power_mode(options_, started_in);
      if (back.status != proto::PowerModeStatus::kOk)
        log(link, proto::LogLevel::kWarning, std::string("could not switch back to ") + started_in + ": " + back.detail);
    }
    sampling = false;
    if (sampler.joinable()) sampler.join();
    if (probe_) probe_->stop();
    done.end = outcome.failed        ? proto::RunEnd::kFailed
               : outcome.interrupted ? proto::RunEnd::kStopped
                                     : proto::RunEnd::kCompleted;
    done.spans_sent = outcome.spans;
    done.samples_sent = samples;
    done.frames_sent = outcome.spans + frames;
    {
      std::lock_guard lock(commands.m);
      running_ = false;
      last_done_ = done;
    }
    link.send(done);
  }

  struct Outcome {
    uint32_t spans = 0;
    bool interrupted = false;
    bool failed = false;
  };

  bool send_span(Connection& link, const PlannedOp& op, int64_t begin, int64_t end, uint32_t reps) {
    proto::OpSpanMsg span{.op_id = op.op_id,
                          .phase = static_cast<uint8_t>(op.phase),
                          .begin_ticks = static_cast<uint64_t>(begin),
                          .end_ticks = static_cast<uint64_t>(end),
                          .repetitions = reps};
    if (!link.send(span)) return false;
    if (options_.on_span) options_.on_span(op.op_id, op.phase, span.begin_ticks, span.end_ticks, reps);
    return true;
  }

  /// Profile plans and schedules run by their work: each entry in windows of repetitions.
  /// `o` counts the spans sent as they go, so a failure part-way still reports them.
  template <class Stopped, class BeforeEntry>
  Outcome time_windows(Connection& link, Commands& commands, const proto::Start& start,
                       const std::vector<PlannedOp>& plan, const Stopped& stopped, Outcome& o,
                       const BeforeEntry& before_entry) {
    const auto min_window_ns = static_cast<int64_t>(start.min_window_us) * 1000;
    for (uint32_t loop = 0; !o.interrupted && (start.loops == 0 || loop < start.loops); ++loop) {
      for (std::size_t entry = 0; entry < plan.size(); ++entry) {
        const PlannedOp& op = plan[entry];
        before_entry(entry);
        for (uint16_t w = 0; w < op.windows && !o.interrupted; ++w) {
          if ((o.interrupted = stopped())) break;
          auto run_once = [&] {
            if (op.shape.kind == profiler::OpKind::kTransfer) transfer(link, commands, op);
            else runner_.run(op.shape, op.phase, op.copies);
          };
          for (uint16_t i = 0; i < op.warmup_reps; ++i) run_once();
          const int64_t begin = agent_clock().now_ns();
          uint32_t reps = 0;
          do {
            run_once();
            ++reps;
          } while (op.shape.kind != profiler::OpKind::kIdle &&
                   agent_clock().now_ns() - begin < min_window_ns);
          if (send_span(link, op, begin, agent_clock().now_ns(), reps)) ++o.spans;
          if (op.idle_after_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(op.idle_after_us));
        }
        if (o.interrupted) break;
      }
    }
    return o;
  }

  /// One transfer of a link-test window (protocol v6), timed from its first byte to its
  /// end: link-send writes the bytes as LinkData and waits for the host's LinkAck;
  /// link-receive sends a LinkPull and waits for the last HostLinkData frame.
  void transfer(Connection& link, Commands& commands, const PlannedOp& op,
                const std::vector<uint8_t>* payload = nullptr, std::vector<uint8_t>* received = nullptr) {
    const uint32_t bytes = op.shape.dims[0];
    if (payload && payload->size() != bytes)
      throw InputError("link-send of " + std::to_string(payload->size()) + " bytes where the plan moves " +
                       std::to_string(bytes));
    if (bytes == 0) throw InputError("a transfer of 0 bytes measures nothing");
    // A pipeline's transfers carry their tag (the host relays them between boards), and a
    // receive waits as long as the upstream board takes to produce its bytes.
    const uint32_t tag = op.shape.dims[1];
    const uint32_t id = tag != 0 ? tag : ++next_transfer_;
    const auto timeout = std::chrono::seconds(tag != 0 ? 120 : 10);
    if (op.phase == profiler::Phase::kLinkReceive) {
      link.send(proto::LinkPull{.transfer = id, .bytes = bytes});
      std::unique_lock lock(commands.m);
      if (!commands.cv.wait_for(lock, timeout,
                                [&] { return commands.rx_done == id || link.broken() || commands.stop || stop_; }) ||
          link.broken() || commands.stop || stop_)
        throw DeviceError("link-receive of " + std::to_string(bytes) + " bytes: the host sent no data within " +
                          std::to_string(timeout.count()) + " s");
      if (commands.rx_bytes != bytes)
        throw DeviceError("link-receive: " + std::to_string(commands.rx_bytes) + " bytes arrived of the " +
                          std::to_string(bytes) + " pulled");
      if (received) *received = std::move(commands.rx_data);
      commands.rx_data.clear();
      return;
    }
    if (op.phase != profiler::Phase::kLinkSend)
      throw InputError("a transfer's phase must be link-send or link-receive");
    static thread_local proto::LinkData data;
    data.transfer = id;
    bool sent = true;
    proto::for_each_link_frame(bytes, proto::kMaxLinkDataBytes, [&](uint32_t offset, uint32_t n, bool last) {
      data.offset = offset;
      data.fill(n);
      if (payload) std::copy_n(payload->data() + offset, n, data.data);
      data.last = last;
      return sent = link.send(data);
    });
    if (!sent) throw DeviceError("link-send: the link broke");
    std::unique_lock lock(commands.m);
    if (!commands.cv.wait_for(lock, timeout,
                              [&] { return commands.acked_transfer == id || link.broken() || commands.stop || stop_; }) ||
        link.broken() || commands.stop || stop_)
      throw DeviceError("link-send of " + std::to_string(bytes) + " bytes: no acknowledgement from the host within " +
                        std::to_string(timeout.count()) + " s");
  }

  /// A pipeline stage on real tensors (protocol v6 ExecuteStage): the stage of the zoo model
  /// with the whole model's parameters (seed 1), one training iteration per micro-batch (seed
  /// j + 1), run step by step as the host sent them, micro-batch by micro-batch: activations
  /// and gradients go out and come in as the tensors' own bytes. Each timed step (all but
  /// frees) is a plan entry after the plan's first (an idle window). Then the digest of every
  /// micro-batch's parameter gradients, in micro-batch and op order.
  template <class Stopped>
  Outcome execute_stage(Connection& link, Commands& commands, const proto::Start& start,
                        const std::vector<PlannedOp>& plan, const Execution& execution, const Stopped& stopped) {
    if (!execution.model) throw InputError("no ExecuteModel before the Start");
    if (!execution.complete) throw InputError("the stage's steps did not all arrive");
    const proto::ExecuteStage& st = *execution.stage;
    const planner::ForwardGraph whole = planner::zoo_model(execution.model->model, execution.model->batch);
    if (st.end_op > whole.ops.size())
      throw InputError("stage ops " + std::to_string(st.first_op) + ".." + std::to_string(st.end_op - 1) +
                       " are not in " + whole.name);
    const int first = static_cast<int>(st.first_op), end = static_cast<int>(st.end_op);
    const planner::ForwardGraph forward = planner::stage_forward(whole, first, end);
    const planner::TrainingGraph graph = runtime::stage_structure_of(whole, first, end);
    const auto all_params = runtime::initial_parameters(whole, runtime::structure_of(whole), 1);
    const std::vector<std::vector<float>> params(all_params.begin() + first, all_params.begin() + end);
    int receive_node = -1;
    for (std::size_t i = 0; i < graph.nodes.size(); ++i)
      if (graph.nodes[i].op == "receive") receive_node = static_cast<int>(i);
    const auto timed = static_cast<std::size_t>(std::count_if(
        execution.raw_steps.begin(), execution.raw_steps.end(), [](const auto& s) { return s.first != 3; }));
    if (plan.empty() || plan.front().phase != profiler::Phase::kIdle || timed + 1 != plan.size())
      throw InputError("the stage has " + std::to_string(timed) + " timed steps but the plan " +
                       std::to_string(plan.size()) + " entries (an idle window, then one per step)");
    std::vector<std::unique_ptr<runtime::TrainingIteration>> it;
    for (uint16_t j = 0; j < st.microbatches; ++j) {
      it.push_back(std::make_unique<runtime::TrainingIteration>(
          forward, graph, options_.scratch / ("ergon-stage-mb" + std::to_string(j)), static_cast<uint32_t>(j + 1)));
      it.back()->set_parameters(params);
    }
    log(link, proto::LogLevel::kInfo,
        "executing ops " + std::to_string(first) + ".." + std::to_string(end - 1) + " of " + whole.name + ": " +
            std::to_string(st.microbatches) + " micro-batches, " + std::to_string(execution.raw_steps.size()) +
            " steps on real tensors");
    Outcome o;
    {
      const int64_t begin = agent_clock().now_ns();
      std::this_thread::sleep_for(std::chrono::microseconds(plan.front().shape.dims[0]));
      if (send_span(link, plan.front(), begin, agent_clock().now_ns(), 1)) ++o.spans;
    }
    auto bytes_of = [](const std::vector<float>& v) {
      std::vector<uint8_t> b(v.size() * sizeof(float));
      std::memcpy(b.data(), v.data(), b.size());
      return b;
    };
    std::size_t next = 1;
    for (const auto& [kind, code] : execution.raw_steps) {
      if ((o.interrupted = stopped())) return o;
      const bool moves = kind == 4 || kind == 5;
      // A transfer's code is its tag (link, micro-batch, direction); any other step's carries
      // its micro-batch in the top 8 bits.
      const uint32_t mb = moves ? ((code - 1) / 2) % 65536 : code >> 24;
      const bool gradient = moves && (code - 1) % 2 == 1;
      if (mb >= it.size()) throw InputError("a step of micro-batch " + std::to_string(mb) + " of " + std::to_string(it.size()));
      runtime::TrainingIteration& x = *it[mb];
      const planner::Step step{static_cast<planner::StepKind>(moves ? 0 : kind), static_cast<int>(code & 0xFFFFFF)};
      if (kind == 3) {
        x.run(step);
        continue;
      }
      const PlannedOp& entry = plan[next++];
      const int64_t begin = agent_clock().now_ns();
      if (kind == 4) {
        const std::vector<uint8_t> payload = bytes_of(gradient ? x.input_gradient() : x.output());
        transfer(link, commands, entry, &payload);
      } else if (kind == 5) {
        std::vector<uint8_t> got;
        transfer(link, commands, entry, nullptr, &got);
        std::vector<float> values(got.size() / sizeof(float));
        std::memcpy(values.data(), got.data(), values.size() * sizeof(float));
        if (gradient) {
          if (receive_node < 0) throw InputError("a gradient for the last stage, which computes its own loss");
          x.set_output_gradient(std::move(values));
          x.run(planner::Step{planner::StepKind::kCompute, receive_node});
        } else {
          x.set_input(std::move(values));
        }
      } else {
        x.run(step);
      }
      if (send_span(link, entry, begin, agent_clock().now_ns(), 1)) ++o.spans;
    }
    uint64_t digest = 0xcbf29ce484222325ULL;
    float loss = 0;
    for (auto& x : it) {
      const runtime::ExecutionResult r = x->finish();
      digest = gradient_digest(r.parameter_grads, digest);
      loss = r.loss;
    }
    link.send(proto::ExecutionReport{.run_tag = start.run_tag,
                                     .loss_bits = std::bit_cast<uint32_t>(loss),
                                     .gradient_digest = digest});
    return o;
  }

  /// A schedule on real tensors: one untimed iteration, then `start.loops` timed ones (at
  /// least one), every step once per iteration, in order, the timed ones (all but frees)
  /// matching the plan's entries one for one; then what the last iteration computed.
  template <class Stopped, class BeforeEntry>
  Outcome execute_schedule(Connection& link, const proto::Start& start, const std::vector<PlannedOp>& plan,
                           const Execution& execution, const Stopped& stopped, const BeforeEntry& before_entry) {
    if (!execution.model) throw InputError("no ExecuteModel before the Start");
    if (!execution.complete)
      throw InputError("the schedule's steps did not all arrive (" + std::to_string(execution.steps.size()) +
                       " announced)");
    const auto timed = static_cast<std::size_t>(
        std::count_if(execution.steps.begin(), execution.steps.end(),
                      [](const planner::Step& st) { return st.kind != planner::StepKind::kFree; }));
    if (timed != plan.size())
      throw InputError("the schedule has " + std::to_string(timed) + " timed steps but the plan " +
                       std::to_string(plan.size()) + " entries");
    const planner::ForwardGraph forward = planner::zoo_model(execution.model->model, execution.model->batch);
    const planner::TrainingGraph graph = runtime::structure_of(forward);
    runtime::TrainingIteration iteration(forward, graph, options_.scratch / "ergon-execute", execution.model->seed);
    const uint32_t iterations = std::max<uint32_t>(1, start.loops);
    log(link, proto::LogLevel::kInfo,
        "executing " + forward.name + " at batch " + std::to_string(execution.model->batch) + ": " +
            std::to_string(execution.steps.size()) + " steps on real tensors, " + std::to_string(iterations) +
            (iterations == 1 ? " iteration" : " iterations") + " timed after one untimed");
    Outcome o;
    // Training runs iteration after iteration: the first faults in every buffer it allocates
    // (gradients, outputs, scratch) and grows the heap, the ones after reuse them. One untimed
    // iteration first, so that the timed one is what every later iteration costs.
    for (const planner::Step& st : execution.steps) {
      if ((o.interrupted = stopped())) return o;
      iteration.run(st);
    }
    // One iteration timed once varies by more than a cost model's error on a machine whose
    // caches, clock and disk are shared: the host compares the median of several.
    for (uint32_t it = 0; it < iterations; ++it) {
      iteration.next_iteration();
      std::size_t next = 0;
      for (const planner::Step& st : execution.steps) {
        if ((o.interrupted = stopped())) return o;
        if (st.kind == planner::StepKind::kFree) {
          iteration.run(st);
          continue;
        }
        // No warm-up of a single step: its effect (a recomputation, a page-out) cannot be run twice.
        before_entry(next);
        const int64_t begin = agent_clock().now_ns();
        iteration.run(st);
        if (send_span(link, plan[next++], begin, agent_clock().now_ns(), 1)) ++o.spans;
      }
    }
    const runtime::ExecutionResult r = iteration.finish();
    proto::ExecutionReport report{.run_tag = start.run_tag,
                                  .loss_bits = std::bit_cast<uint32_t>(r.loss),
                                  .computes = static_cast<uint32_t>(r.computes),
                                  .recomputes = static_cast<uint32_t>(r.recomputes),
                                  .paged_out_bytes = r.paged_out_bytes,
                                  .paged_in_bytes = r.paged_in_bytes,
                                  .peak_bytes = r.peak_bytes,
                                  .gradient_digest = gradient_digest(r.parameter_grads)};
    link.send(report);
    return o;
  }

  void log(Connection& link, proto::LogLevel level, const std::string& text) {
    proto::Log msg;
    msg.level = level;
    msg.length = static_cast<uint16_t>(std::min(text.size(), proto::kMaxLogText));
    std::memcpy(msg.text, text.data(), msg.length);
    link.send(msg);
  }

  /// Samples the probe while the run lasts and sends a PowerBatch every 50 ms (or when full).
  void sample_loop(Connection& link, const std::atomic<bool>& sampling,
                   std::atomic<uint32_t>& samples, std::atomic<uint32_t>& frames) {
    // Sampling must not wait behind the kernels: a real-time priority where the agent may
    // have one (root, or CAP_SYS_NICE); it sleeps between conversions, so it takes no core.
    sched_param param{};
    param.sched_priority = 10;
    ::pthread_setschedparam(::pthread_self(), SCHED_FIFO, &param);
    if (!probe_->info().total_known) {
      std::string rails;
      for (const auto& r : probe_->info().channels) rails += (rails.empty() ? "" : ", ") + r.name;
      log(link, proto::LogLevel::kError,
          "probe: " + probe_->info().kind + " has no rail for the board's whole input (it has " +
              rails + "), so the board's power is unknown and none is streamed; measure the "
              "supply lead (--probe ina219:...)");
      return;
    }
    proto::PowerBatch batch{};
    std::vector<probes::PowerSample> got;
    int64_t last_send = agent_clock().now_ns();
    auto flush = [&] {
      if (batch.count == 0) return;
      if (link.send(batch)) {
        samples += batch.count;
        ++frames;
      }
      batch.count = 0;
      last_send = agent_clock().now_ns();
    };
    try {
      while (sampling && !link.broken()) {
        got.clear();
        probe_->read(got);
        for (const auto& s : got) {
          if (s.rail != 0) continue;  // the board's input rail; parts of it are not streamed
          if (!batch.fits(s.t_ticks)) flush();
          if (batch.append(s.t_ticks, s.bus_uv, s.current_ua, s.power_uw, s.flags)) flush();
        }
        if (agent_clock().now_ns() - last_send > 50'000'000) flush();
      }
    } catch (const Error& e) {
      log(link, proto::LogLevel::kError, std::string("probe: ") + e.what());
    }
    flush();
  }

  const AgentOptions& options_;
  const std::atomic<bool>& stop_;
  profiler::OpRunner runner_;
  std::unique_ptr<probes::Probe> probe_;
  BoardKind kind_ = BoardKind::kLinuxHost;
  std::string board_type_;  ///< the descriptor it runs as (--board); empty for a Linux host
  bool running_ = false;  ///< guarded by Commands::m
  uint32_t next_transfer_ = 0;
  std::optional<proto::RunDone> last_done_;
};

}  // namespace

void run_agent(const AgentOptions& options, const std::atomic<bool>& stop) {
  Agent agent(options, stop);
  serve_link(options.link, stop, options.on_listening, [&](int fd) { agent.serve(fd); });
}

AgentThread::AgentThread(AgentOptions options) : options_(std::move(options)) {
  options_.on_listening = [this](const std::string& l) {
    std::lock_guard lock(m_);
    link_ = l;
    cv_.notify_all();
  };
  thread_ = std::thread([this] {
    try {
      run_agent(options_, stop_);
    } catch (const Error& e) {
      std::lock_guard lock(m_);
      error_ = e.what();
      cv_.notify_all();
    }
  });
  std::unique_lock lock(m_);
  cv_.wait_for(lock, std::chrono::seconds(10), [&] { return !link_.empty() || !error_.empty(); });
  if (link_.empty()) {
    lock.unlock();
    stop_ = true;
    thread_.join();
    throw DeviceError("could not start the local agent: " + (error_.empty() ? "no link within 10 s" : error_));
  }
}

AgentThread::~AgentThread() {
  stop_ = true;
  thread_.join();
}

}  // namespace ergon::agent
