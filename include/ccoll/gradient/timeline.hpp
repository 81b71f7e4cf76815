// ccoll/gradient/timeline.hpp: the iteration time of a gradient schedule, and its timeline.
//
// A schedule is a list of messages in issue order (the first one holds layer L), each a run of
// consecutive layers all-reduced together (tensor fusion), with a start rule: `after_previous`
// starts once every earlier message has finished (WFBP's one communication stream, [MG-WFBP] Eq. 7;
// a "normal" layer of [ASC-WFBP] Def. 1), `immediate` starts as soon as its gradients are ready and
// fewer than `max_concurrent` messages are in flight (a "simultaneous" layer, [ASC-WFBP] Def. 3).
// Messages start in issue order (one queue, as in Horovod and NCCL streams).
//
// The evaluator is a discrete-event fluid simulation: a message first pays its startup (latency,
// not shared), then transfers; while k messages transfer at once each progresses at 1 / gamma_k of
// its solo speed (comm_model.hpp). Two messages started together thus take a + gamma b m each
// ([ASC-WFBP] Eq. 9); a partial overlap slows only the overlapped part (the intent of Eq. 12-13,
// but symmetric: both messages of the overlap are slowed, where Eq. 13 charges only the later one,
// and the overlap ends when the shorter message does, where Eq. 12 assumes the later one outlives
// the earlier). The iteration time is forward + backward + the communication not hidden behind the
// backward pass ([MG-WFBP] Eq. 8).
//
// Layer typings ([ASC-WFBP] Sec. IV) map onto schedules: 'm' merges a layer into the layer below it
// (layer l into l - 1), and the lowest layer of each run decides the run's start rule: 'n' ->
// after_previous, 's' -> immediate.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/gradient/comm_model.hpp"
#include "ccoll/gradient/profile.hpp"

namespace ccoll::gradient {

enum class StartRule : std::uint8_t { after_previous, immediate };

struct Message {
  int lo = 0;  // lowest layer index (0-based) of the run; its readiness makes the message ready
  int hi = 0;  // highest layer index of the run
  StartRule rule = StartRule::after_previous;
  double not_before_s = 0;  // earliest start (e.g. a fusion-buffer cycle tick); 0 = none
};

struct Schedule {
  std::string policy;
  std::vector<Message> messages;  // issue order, messages[0].hi == L - 1
  int max_concurrent = 1;
};

enum class LayerType : char { normal = 'n', merged = 'm', simultaneous = 's' };
using LayerTyping = std::vector<LayerType>;  // [0] = layer 1

inline std::string typing_string(const LayerTyping& t) {
  std::string s;
  for (LayerType x : t) s.push_back(static_cast<char>(x));
  return s;
}

inline LayerTyping parse_typing(std::string_view s) {
  LayerTyping t;
  for (char c : s) {
    if (c != 'n' && c != 'm' && c != 's')
      throw_invalid_argument(-1, "layer type", "'n', 'm' or 's'", std::string(1, c));
    t.push_back(static_cast<LayerType>(c));
  }
  return t;
}

inline Schedule schedule_from_typing(const LayerTyping& types, int max_concurrent,
                                     std::string policy = "typing") {
  if (types.empty()) throw_invalid_argument(-1, "layer_types", "non-empty", "empty");
  if (types[0] == LayerType::merged)
    throw_invalid_argument(-1, "layer_types[0]", "'n' or 's' (layer 1 has no layer below)", "'m'");
  Schedule s;
  s.policy = std::move(policy);
  s.max_concurrent = max_concurrent;
  for (int i = static_cast<int>(types.size()) - 1; i >= 0;) {
    Message m;
    m.hi = i;
    while (types[static_cast<std::size_t>(i)] == LayerType::merged) --i;
    m.lo = i;
    m.rule = types[static_cast<std::size_t>(i)] == LayerType::simultaneous
                 ? StartRule::immediate
                 : StartRule::after_previous;
    s.messages.push_back(m);
    --i;
  }
  return s;
}

inline LayerTyping typing_from_schedule(const Schedule& s, int num_layers) {
  LayerTyping t(static_cast<std::size_t>(num_layers), LayerType::merged);
  for (const Message& m : s.messages)
    t[static_cast<std::size_t>(m.lo)] =
        m.rule == StartRule::immediate ? LayerType::simultaneous : LayerType::normal;
  return t;
}

// Throws unless the messages cover layers L-1 .. 0 as consecutive runs in backward order.
inline void validate(const Schedule& s, int num_layers) {
  if (s.max_concurrent < 1)
    throw_invalid_argument(-1, "max_concurrent", ">= 1", std::to_string(s.max_concurrent));
  int expect_hi = num_layers - 1;
  for (std::size_t k = 0; k < s.messages.size(); ++k) {
    const Message& m = s.messages[k];
    if (m.hi != expect_hi || m.lo > m.hi || m.lo < 0)
      throw_invalid_argument(
          -1, detail::cat({"messages[", std::to_string(k), "]"}),
          detail::cat({"layers ", std::to_string(expect_hi), " down to some lo"}),
          detail::cat({std::to_string(m.hi), "..", std::to_string(m.lo)}));
    expect_hi = m.lo - 1;
  }
  if (expect_hi != -1)
    throw_invalid_argument(-1, "messages", "a cover of every layer",
                           detail::cat({"layers 0..", std::to_string(expect_hi), " missing"}));
}

struct MessageTiming {
  double ready_s = 0, start_s = 0, end_s = 0;
  std::uint64_t bytes = 0;
  int lane = 0;  // communication lane in the trace (0 = first)
};

// Communication side of the evaluator, resumable so that planners can branch on its state.
class CommSim {
 public:
  struct Waiting {
    int id;
    double ready, startup, work;
    StartRule rule;
    int channel = -1;  // >= 0: may only start once no message in flight holds this lane
  };
  struct InFlight {
    int id;
    double startup, work;  // remaining startup; remaining solo transfer time
    int lane;
  };

  CommSim(const CommModel* model, int max_concurrent, std::vector<MessageTiming>* record = nullptr)
      : model_(model), max_concurrent_(max_concurrent), record_(record) {}

  double now() const { return now_; }
  bool idle() const { return flight_.empty() && queue_.empty(); }
  const std::vector<InFlight>& in_flight() const { return flight_; }
  // Messages issued but not started yet (the started ones stay in queue_ until compact()).
  std::span<const Waiting> waiting() const {
    return {queue_.data() + qhead_, queue_.size() - qhead_};
  }
  double last_end() const { return last_end_; }

  // channel >= 0 pins the message to that lane (GradientSync's fixed channels,
  // engine/channel_plan.hpp); -1 lets it take the first free lane.
  void issue(int id, double ready, double bytes, StartRule rule, int channel = -1) {
    queue_.push_back({id, ready, model_->startup_s(), model_->transfer_s(bytes), rule, channel});
    if (record_) {
      if (static_cast<int>(record_->size()) <= id)
        record_->resize(static_cast<std::size_t>(id) + 1);
      (*record_)[static_cast<std::size_t>(id)].ready_s = ready;
      (*record_)[static_cast<std::size_t>(id)].bytes = static_cast<std::uint64_t>(bytes);
    }
    start_ready();
  }

  // Run until `t` (no message issued after this call is considered before `t`).
  void advance_to(double t) {
    for (;;) {
      start_ready();
      if (flight_.empty() && (qhead_ >= queue_.size() || queue_[qhead_].ready > t)) {
        if (t < kInf && t > now_) now_ = t;
        return;
      }
      const int transferring = static_cast<int>(std::count_if(
          flight_.begin(), flight_.end(), [](const InFlight& f) { return f.startup <= 0; }));
      const double g = model_->gamma_k(transferring);
      double next = t;
      std::size_t first = flight_.size();  // the message in flight whose phase ends first
      double least = kInf;                 // and the time left in that phase
      for (std::size_t i = 0; i < flight_.size(); ++i) {
        const InFlight& f = flight_[i];
        const double left = f.startup > 0 ? f.startup : f.work * g;
        if (left < least) {
          least = left;
          first = i;
        }
        next = std::min(next, now_ + left);
      }
      if (qhead_ < queue_.size() && queue_[qhead_].ready > now_)
        next = std::min(next, queue_[qhead_].ready);
      if (!(next > now_)) {
        // now_ + least rounds to now_ once now_ is large (beyond about 4000 s, an ulp exceeds a
        // picosecond): end that phase at now_ rather than stop with the message unfinished.
        if (first == flight_.size() || !(least < t - now_)) return;  // reached t
        advance_flight(least, g, first);
        retire();
        continue;
      }
      advance_flight(next - now_, g, flight_.size());
      now_ = next;
      retire();
    }
  }

  double run_to_completion() {
    advance_to(kInf);
    return last_end_;
  }

  // Canonical form for comparing states: in-flight sorted, drained queue entries dropped.
  void compact() {
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(qhead_));
    qhead_ = 0;
    std::sort(flight_.begin(), flight_.end(), [](const InFlight& a, const InFlight& b) {
      return a.startup != b.startup ? a.startup < b.startup : a.work < b.work;
    });
  }

  static constexpr double kInf = std::numeric_limits<double>::infinity();

 private:
  // A phase with at most max(kEps, kRelEps * now) seconds left is over: absorbs the rounding of
  // now + dt, a few ulps of now.
  static constexpr double kEps = 1e-12;
  static constexpr double kRelEps = 4 * std::numeric_limits<double>::epsilon();

  // dt seconds of progress for every message in flight, g the transfer stretch meanwhile; the
  // current phase (startup or transfer) of flight_[ends], if any, is the one that ends.
  void advance_flight(double dt, double g, std::size_t ends) {
    const double eps = std::max(kEps, kRelEps * now_);
    for (std::size_t i = 0; i < flight_.size(); ++i) {
      InFlight& f = flight_[i];
      if (f.startup > 0) {
        f.startup -= dt;
        if (f.startup <= eps || i == ends) f.startup = 0;
      } else {
        f.work -= dt / g;
        if (f.work <= eps || i == ends) f.work = 0;
      }
    }
  }

  bool startable() const {
    if (qhead_ >= queue_.size()) return false;
    const Waiting& w = queue_[qhead_];
    if (w.ready > now_) return false;
    if (w.channel >= 0 && std::any_of(flight_.begin(), flight_.end(),
                                      [&](const InFlight& f) { return f.lane == w.channel; }))
      return false;
    return w.rule == StartRule::after_previous ? flight_.empty()
                                               : static_cast<int>(flight_.size()) < max_concurrent_;
  }

  void start_ready() {
    while (startable()) {
      const Waiting w = queue_[qhead_++];
      int lane = w.channel >= 0 ? w.channel : 0;
      if (record_) {
        while (w.channel < 0 && std::any_of(flight_.begin(), flight_.end(),
                                            [lane](const InFlight& f) { return f.lane == lane; }))
          ++lane;
        (*record_)[static_cast<std::size_t>(w.id)].start_s = now_;
        (*record_)[static_cast<std::size_t>(w.id)].lane = lane;
      }
      flight_.push_back({w.id, w.startup, w.work, lane});
      retire();
    }
  }

  void retire() {
    for (std::size_t i = 0; i < flight_.size();) {
      if (flight_[i].startup <= 0 && flight_[i].work <= 0) {
        if (record_) (*record_)[static_cast<std::size_t>(flight_[i].id)].end_s = now_;
        last_end_ = std::max(last_end_, now_);
        flight_[i] = flight_.back();
        flight_.pop_back();
      } else {
        ++i;
      }
    }
  }

  const CommModel* model_;
  int max_concurrent_;
  std::vector<MessageTiming>* record_;
  double now_ = 0;
  double last_end_ = 0;
  std::vector<InFlight> flight_;
  std::vector<Waiting> queue_;
  std::size_t qhead_ = 0;
};

struct Timeline {
  double forward_s = 0;
  double backward_end_s = 0;    // forward + backward
  double comm_end_s = 0;        // last message's end
  double iteration_s = 0;       // max of the two ([MG-WFBP] Eq. 8)
  std::vector<double> ready_s;  // per layer index: backward end
  std::vector<MessageTiming> messages;

  double exposed_comm_s() const { return iteration_s - backward_end_s; }
};

inline std::uint64_t message_bytes(const ModelProfile& p, const Message& m) {
  std::uint64_t b = 0;
  for (int i = m.lo; i <= m.hi; ++i) b += p.layers[static_cast<std::size_t>(i)].bytes;
  return b;
}

inline Timeline evaluate(const ModelProfile& p, const Schedule& s, const CommModel& model) {
  validate(s, p.num_layers());
  Timeline tl;
  tl.forward_s = p.forward_s;
  tl.ready_s = p.ready_times();
  tl.backward_end_s = tl.ready_s.front();
  CommSim sim(&model, s.max_concurrent, &tl.messages);
  for (std::size_t k = 0; k < s.messages.size(); ++k) {
    const Message& m = s.messages[k];
    const double ready = std::max(tl.ready_s[static_cast<std::size_t>(m.lo)], m.not_before_s);
    sim.issue(static_cast<int>(k), ready, static_cast<double>(message_bytes(p, m)), m.rule);
  }
  tl.comm_end_s = sim.run_to_completion();
  tl.iteration_s = std::max(tl.backward_end_s, tl.comm_end_s);
  return tl;
}

inline double iteration_time(const ModelProfile& p, const Schedule& s, const CommModel& model) {
  return evaluate(p, s, model).iteration_s;
}

// The JSON form of an evaluated schedule: {"policy", "layer_types", "messages": [{"layers",
// "start_s", "end_s"}], "predicted_iteration_s"}; layers are 1-based, listed from the highest.
inline nlohmann::json to_json(const ModelProfile& p, const Schedule& s, const Timeline& tl) {
  nlohmann::json msgs = nlohmann::json::array();
  for (std::size_t k = 0; k < s.messages.size(); ++k) {
    nlohmann::json layers = nlohmann::json::array();
    for (int i = s.messages[k].hi; i >= s.messages[k].lo; --i) layers.push_back(i + 1);
    msgs.push_back({{"layers", std::move(layers)},
                    {"bytes", tl.messages[k].bytes},
                    {"ready_s", tl.messages[k].ready_s},
                    {"start_s", tl.messages[k].start_s},
                    {"end_s", tl.messages[k].end_s},
                    {"lane", tl.messages[k].lane}});
  }
  nlohmann::json types = nlohmann::json::array();
  for (LayerType t : typing_from_schedule(s, p.num_layers()))
    types.push_back(std::string(1, static_cast<char>(t)));
  return {{"policy", s.policy},
          {"model", p.name},
          {"max_concurrent", s.max_concurrent},
          {"layer_types", std::move(types)},
          {"messages", std::move(msgs)},
          {"forward_s", tl.forward_s},
          {"backward_end_s", tl.backward_end_s},
          {"exposed_comm_s", tl.exposed_comm_s()},
          {"predicted_iteration_s", tl.iteration_s}};
}

// Chrome trace (chrome://tracing, Perfetto): lane "compute" (forward, then one slice per layer's
// backward) and one lane per concurrently used communication stream, as in Fig. 1 of [ASC-WFBP] and
// [MG-WFBP].
inline void write_chrome_trace(std::ostream& out, const ModelProfile& p, const Schedule& s,
                               const Timeline& tl) {
  nlohmann::json ev = nlohmann::json::array();
  auto us = [](double t) { return t * 1e6; };
  int lanes = 1;
  for (const auto& m : tl.messages) lanes = std::max(lanes, m.lane + 1);
  ev.push_back({{"name", "thread_name"},
                {"ph", "M"},
                {"pid", 0},
                {"tid", 0},
                {"args", {{"name", "compute"}}}});
  for (int l = 0; l < lanes; ++l)
    ev.push_back({{"name", "thread_name"},
                  {"ph", "M"},
                  {"pid", 0},
                  {"tid", l + 1},
                  {"args", {{"name", detail::cat({"comm ", std::to_string(l)})}}}});
  ev.push_back({{"name", "forward"},
                {"cat", "compute"},
                {"ph", "X"},
                {"pid", 0},
                {"tid", 0},
                {"ts", 0.0},
                {"dur", us(p.forward_s)}});
  for (int i = p.num_layers() - 1; i >= 0; --i) {
    const auto& layer = p.layers[static_cast<std::size_t>(i)];
    ev.push_back({{"name", detail::cat({"bwd ", std::to_string(i + 1)})},
                  {"cat", "compute"},
                  {"ph", "X"},
                  {"pid", 0},
                  {"tid", 0},
                  {"ts", us(tl.ready_s[static_cast<std::size_t>(i)] - layer.backward_s)},
                  {"dur", us(layer.backward_s)},
                  {"args", {{"tensor", layer.name}}}});
  }
  for (std::size_t k = 0; k < s.messages.size(); ++k) {
    const Message& m = s.messages[k];
    const MessageTiming& t = tl.messages[k];
    std::string name = detail::cat({"AR ", std::to_string(m.hi + 1)});
    if (m.lo != m.hi) name += detail::cat({"-", std::to_string(m.lo + 1)});
    ev.push_back({{"name", name},
                  {"cat", "comm"},
                  {"ph", "X"},
                  {"pid", 0},
                  {"tid", t.lane + 1},
                  {"ts", us(t.start_s)},
                  {"dur", us(t.end_s - t.start_s)},
                  {"args",
                   {{"bytes", t.bytes},
                    {"ready_s", t.ready_s},
                    {"rule", m.rule == StartRule::immediate ? "immediate" : "after_previous"}}}});
  }
  out << nlohmann::json{{"traceEvents", std::move(ev)},
                        {"displayTimeUnit", "ms"},
                        {"otherData",
                         {{"policy", s.policy},
                          {"model", p.name},
                          {"predicted_iteration_s", tl.iteration_s}}}}
             .dump()
      << '\n';
}

}  // namespace ccoll::gradient
