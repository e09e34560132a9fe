// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The ingress ZMQ thread (rules: sequence_tracker.hpp; the thread's contract: zmq_source.hpp).
// ~580 lines on purpose: the three sockets (SUB, replay DEALER, monitor), the poll loop and the
// execution of the tracker's actions all work on the one thread-private impl; split, each part
// would need that state passed around or made shared.
#include "actors/ingress/zmq_source.hpp"

#include "base/backoff.hpp"
#include "base/big_endian.hpp"
#include "base/msgpack_int.hpp"
#include "base/rate_limiter.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <future>
#include <mutex>
#include <system_error>
#include <thread>

namespace kvrelay::ingress {

bool sub_binds(std::string_view endpoint, bind_mode mode) noexcept {
  if (mode != bind_mode::auto_detect) return mode == bind_mode::bind;
  const auto scheme_end = endpoint.find("://");
  if (scheme_end == std::string_view::npos) return false;
  const std::string_view scheme = endpoint.substr(0, scheme_end);
  if (scheme != "tcp") return false;  // ipc/inproc: the engine binds those, we dial
  std::string_view host = endpoint.substr(scheme_end + 3);
  const auto colon = host.rfind(':');
  if (colon != std::string_view::npos) host = host.substr(0, colon);
  return host == "*" || host == "0.0.0.0" || host == "[::]" || host == "::";
}

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr uint64_t end_marker = ~uint64_t{0};
// Live messages are 3 frames and replies at most 4; one spare tells "too many" apart.
constexpr size_t max_parts = 5;

// One non-negative msgpack integer at p[i]; false when it is none (or runs past n).
bool read_msgpack_uint(const unsigned char* p, size_t n, size_t& i, uint64_t& out) {
  msgpack_int v;
  size_t used = 0;
  if (i > n || read_msgpack_int(p + i, n - i, v, used) != msgpack_read::ok || v.negative)
    return false;
  out = v.bits;
  i += used;
  return true;
}

// ROCm ATOM #1316 ends a replay with msgpack([oldest, latest]), the ring's span, instead of an
// empty payload (docs/producers.md §2). Exactly that shape is an END; anything else is not.
bool is_ring_span(const zmq::message_t& m, uint64_t& oldest, uint64_t& latest) {
  const auto* p = static_cast<const unsigned char*>(m.data());
  const size_t n = m.size();
  size_t i = 1;
  return n >= 3 && p[0] == 0x92 && read_msgpack_uint(p, n, i, oldest) &&
         read_msgpack_uint(p, n, i, latest) && i == n;
}

uint64_t read_be8(const zmq::message_t& m) { return load_be64(m.data()); }

std::array<char, 8> be8(uint64_t v) {
  std::array<char, 8> out{};
  store_be64(v, out.data());
  return out;
}

// One allocation per batch: the frame and the raw_batch that points into it live together, and
// the batch's shared_ptr keeps both until the decoder is done.
struct zmq_batch : raw_batch {
  zmq::message_t frame;
};

raw_batch_ptr take_batch(zmq::message_t& m, uint64_t seq, bool replayed) {
  auto b = std::make_shared<zmq_batch>();
  b->frame = std::move(m);
  b->seq = seq;
  b->replayed = replayed;
  b->data = b->frame.data<char>();
  b->size = b->frame.size();
  return b;
}

uint64_t steady_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch())
          .count());
}

// stop() writes the eventfd so a poll without a timeout returns at once.
struct wake_fd {
  int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  wake_fd() {
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  }
  ~wake_fd() { ::close(fd); }
  wake_fd(const wake_fd&) = delete;
  wake_fd& operator=(const wake_fd&) = delete;
  void wake() const noexcept {
    const uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(fd, &one, sizeof one);
  }
};

bool same(const zmq_source_stats& a, const zmq_source_stats& b) {
  // Both counter blocks are plain uint64_t fields: no padding to compare.
  return std::memcmp(&a.tracker, &b.tracker, sizeof a.tracker) == 0 &&
         std::memcmp(&a.frames, &b.frames, sizeof a.frames) == 0 && a.throttled == b.throttled &&
         a.overloads == b.overloads && a.overloaded == b.overloaded &&
         a.connects == b.connects && a.disconnects == b.disconnects &&
         a.connected == b.connected && a.live == b.live && a.catching_up == b.catching_up &&
         a.phase == b.phase && a.ring.capacity == b.ring.capacity &&
         a.ring.exact == b.ring.exact && a.log_replayed == b.log_replayed &&
         a.log_replaying == b.log_replaying;
}

// One multipart message; frames beyond max_parts are received and dropped so the socket stays
// in step, and only counted.
struct multipart {
  std::array<zmq::message_t, max_parts> part;
  size_t count = 0;
};

bool recv_multipart(zmq::socket_t& s, multipart& mp) {
  mp.count = 0;
  zmq::message_t scratch;
  bool more = true;
  bool first = true;
  while (more) {
    zmq::message_t& target = mp.count < max_parts ? mp.part[mp.count] : scratch;
    // Parts of one message arrive atomically: only the first can be missing.
    const auto got = s.recv(target, first ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
    if (!got) return false;
    first = false;
    more = target.more();
    ++mp.count;
  }
  return true;
}

}  // namespace

// -- impl: the thread's world -------------------------------------------------------------------

struct zmq_source::impl {
  impl(zmq_source_options o, sink_fn s)
      : opts(std::move(o)), sink(std::move(s)), tracker(make_tracker_options(opts)),
        replay_backoff(opts.replay_backoff_initial, opts.replay_backoff_max) {
    if (!opts.credits) opts.credits = std::make_shared<credit_line>();
    credit_base = opts.credits->credited();
    if (opts.replay_log && !opts.replay_log->ranges.empty()) {
      log_reader.emplace(opts.replay_log);
      log_replaying = true;
    }
  }

  // Delivered and not yet credited. Signed: a dead consumer's late credits may overshoot.
  uint64_t in_flight() const noexcept {
    const auto d = static_cast<int64_t>(delivered.load(std::memory_order_relaxed));
    const auto c = static_cast<int64_t>(opts.credits->credited() - credit_base);
    return d > c ? static_cast<uint64_t>(d - c) : 0;
  }

  static tracker_options make_tracker_options(const zmq_source_options& o) {
    tracker_options t = o.tracker;
    t.replay_enabled = !o.replay_endpoint.empty();
    return t;
  }

  // -- shared with other threads --
  zmq_source_options opts;
  sink_fn sink;
  std::atomic<bool> stop_flag{false};
  std::atomic<bool> alive{false};
  std::atomic<uint64_t> delivered{0};  // written by the thread, read by stats()
  uint64_t credit_base = 0;            // opts.credits->credited() when the source was made
  wake_fd waker;
  mutable std::mutex mu;  // guards snapshot, sub_endpoint and injected
  zmq_source_stats snapshot;
  std::vector<ingress_notice_ptr> injected;  // inject(): delivered by the thread
  std::string sub_endpoint;
  std::thread thread;  // touched by the owner only
  bool started_once = false;
  std::promise<std::string> ready;  // "" once the sockets are up, else the setup error
  bool ready_sent = false;          // thread-owned

  // -- owned by the thread --
  std::shared_ptr<zmq::context_t> ctx;
  ring_span ring;
  // The delta log replayed at start (LR5): the SUB waits, the tracker is not started.
  std::optional<snapshot::replay_reader> log_reader;
  bool log_replaying = false;
  uint64_t log_replayed = 0;
  uint64_t log_next = 0;  // the seq after the last batch replayed from the log
  std::string log_replay_error;
  sequence_tracker<raw_batch_ptr> tracker;
  sequence_tracker<raw_batch_ptr>::actions actions;
  frame_counters frames;
  uint64_t throttled = 0, connects = 0, disconnects = 0, peers = 0;
  budget_gate gate;           // MG1-MG7 over opts.budget
  uint64_t pause_started = 0; // steady ns of the current budget pause
  bool trim_watch = false;    // a spike's trim (MG5) is still due: keep observing when idle
  // Under a sustained overload the gate pauses many times a second: one warning, then at most
  // one per 10 s with the count since (the counters have every one).
  rate_limiter pause_log{1, 10'000}, resume_log{1, 10'000}, trim_log{1, 10'000};
  std::unique_ptr<zmq::socket_t> dealer;
  bool want_replay = false;
  uint64_t replay_from = 0;
  replay_reason replay_why = replay_reason::catch_up;
  clock::time_point replay_not_before{};
  clock::time_point replay_deadline{};
  bool reader_paused = false;  // the last poll was throttled: the next that reads restarts the wait
  bool probe_pending = false;  // tracker rule ST6: on_probe_due() at probe_at
  clock::time_point probe_at{};
  backoff replay_backoff;  // attempts = consecutive replay failures; reset by any reply
  // One warning per reason, then at most one per 10 s with the count since: frame, seq,
  // reserved, replay.
  std::array<rate_limiter, 4> limits{rate_limiter{1, 10'000}, rate_limiter{1, 10'000},
                                     rate_limiter{1, 10'000}, rate_limiter{1, 10'000}};

  void log(log::level sev, std::string msg, std::vector<log::field> f = {}) {
    if (opts.log && log::enabled(sev)) opts.log(log::record{sev, std::move(msg), std::move(f)});
  }

  void run();
  void run_loop();
  bool signal_ready(const std::string& error);
  void poll_once();
  void drain_sub(zmq::socket_t& sub);
  void drain_dealer();
  void drain_monitor(zmq::socket_t& mon);
  void on_live(multipart& mp);
  void on_reply(multipart& mp);
  void execute();
  void replay_log_step();
  void deliver_injected();
  void open_replay(clock::time_point now);
  void replay_timed_out();
  void close_replay() { dealer.reset(); }
  // How long the open replay may stay silent: the long timeout until its first reply, then the
  // stall one (the engine sends a whole reply in one loop).
  milliseconds replay_patience() const {
    return tracker.replay_answering() ? opts.replay_stall_timeout : opts.replay_timeout;
  }
  void publish_stats();
  bool over_budget();
  // A batch is charged when it is delivered: what the tracker's reorder buffer holds is bounded
  // by the tracker (ST2) and must not keep the replay it waits for from being read.
  raw_batch_ptr charged(raw_batch_ptr b) {
    if (opts.budget && b)
      b->ticket = opts.budget->charge(budget_queue::ingress, b->size + sizeof(zmq_batch));
    return b;
  }
  void reject(uint64_t& counter, size_t limit, const char* what, uint64_t detail);

  std::unique_ptr<zmq::socket_t> sub_sock, mon_sock;
};

void zmq_source::impl::reject(uint64_t& counter, size_t limit, const char* what, uint64_t detail) {
  ++counter;
  uint64_t suppressed = 0;
  if (limits[limit].allow(suppressed))
    log(log::level::warn, "dropping malformed zmq message",
        {{"reason", what}, {"detail", std::to_string(detail)},
         {"suppressed", std::to_string(suppressed)}});
}

// The gate (memory_budget.hpp MG1-MG7): true while the budget is spent and reading must wait.
bool zmq_source::impl::over_budget() {
  const auto& b = opts.budget;
  if (!b) return false;
  const uint64_t now = steady_ns();
  b->sample_rss(now);  // MG7
  const auto d =
      gate.observe(b->used_bytes(), b->used_messages(), b->limit_bytes(), b->limit_messages(), now);
  uint64_t suppressed = 0;
  trim_watch = d.trim_due;
  if (d.paused) {
    pause_started = now;
    b->note_pause();
    const bool pressed = b->pressed();
    if (pressed) b->note_pressure_pause();
    if (pause_log.allow(suppressed))
      log(log::level::warn,
          "memory budget exhausted; ingress paused (overload: batches the engine sends "
          "meanwhile are dropped at the socket and repaired by replay, or declared lost)",
          {{"queued_bytes", std::to_string(b->used_bytes())},
           {"queued_messages", std::to_string(b->used_messages())},
           {"limit_bytes", std::to_string(b->limit_bytes())},
           {"budget_bytes", std::to_string(b->total_bytes())},
           {"rss_bytes", std::to_string(b->rss())},
           {"pressure", pressed ? "process memory at its line" : "none"},
           {"suppressed", std::to_string(suppressed)}});
  }
  if (d.resumed) {
    b->note_resume(now - pause_started);
    if (resume_log.allow(suppressed))
      log(log::level::info, "memory budget available again; ingress resumed",
          {{"paused_ms", std::to_string((now - pause_started) / 1000000)},
           {"queued_bytes", std::to_string(b->used_bytes())},
           {"suppressed", std::to_string(suppressed)}});
  }
  if (d.trim) {
#if defined(__GLIBC__)
    malloc_trim(0);  // the queues drained after a spike: give their pages back to the OS
#endif
    // After an overload the operator has seen the pause: say it ended. A spike below the budget
    // is routine (at most one trim a second, MG5).
    if (!d.after_overload)
      log(log::level::debug, "queues drained after a spike; heap trimmed", {});
    else if (trim_log.allow(suppressed))
      log(log::level::info, "queues drained after an overload; heap trimmed",
          {{"suppressed", std::to_string(suppressed)}});
  }
  return !d.read;
}

void zmq_source::impl::run() {
  // Named for top -H, perf and scripts/idle-wakeups.sh (15 characters at most).
  pthread_setname_np(pthread_self(), "kvr.ingress");
  try {
    run_loop();
  } catch (const zmq::error_t& e) {
    if (e.num() == ETERM) {
      signal_ready("zmq context terminated");
    } else if (!signal_ready(e.what())) {
      log(log::level::error, "zmq recv failed; ingress thread stopping", {{"error", e.what()}});
      sink(source_failed_event{e.what()});
    }
  } catch (const std::exception& e) {
    // Before `ready` this is a setup error that start() reports; after it, the owner restarts us.
    if (!signal_ready(e.what())) sink(source_failed_event{e.what()});
  }
  dealer.reset();
  mon_sock.reset();
  sub_sock.reset();
  publish_stats();
  alive.store(false);
}

bool zmq_source::impl::signal_ready(const std::string& error) {
  if (ready_sent) return false;
  ready_sent = true;
  ready.set_value(error);
  return true;
}

void zmq_source::impl::run_loop() {
  using namespace zmq;
  sub_sock = std::make_unique<socket_t>(*ctx, socket_type::sub);
  auto& sub = *sub_sock;
  sub.set(sockopt::linger, 0);
  sub.set(sockopt::rcvhwm, opts.rcvhwm);
  const auto ivl = opts.reconnect_interval.count() <= 0 ? milliseconds(1000)
                                                        : opts.reconnect_interval;
  sub.set(sockopt::reconnect_ivl, static_cast<int>(ivl.count()));
  sub.set(sockopt::reconnect_ivl_max, 0);  // constant interval, as the reference
  sub.set(sockopt::subscribe, opts.topic);
  // Without ZMQ_IPV6 a connect to tcp://[::1]:port succeeds and never receives anything.
  if (opts.endpoint.rfind("tcp://[", 0) == 0) sub.set(sockopt::ipv6, 1);

  // Peer connect/disconnect events through a monitor PAIR in the same context.
  static std::atomic<uint64_t> monitor_id{0};
  const std::string mon_addr = "inproc://kvrelay-ingress-mon-" + std::to_string(++monitor_id);
  if (zmq_socket_monitor(sub.handle(), mon_addr.c_str(),
                         ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED) != 0)
    throw zmq::error_t();
  mon_sock = std::make_unique<socket_t>(*ctx, socket_type::pair);
  mon_sock->set(sockopt::linger, 0);
  mon_sock->connect(mon_addr);

  const bool bind = sub_binds(opts.endpoint, opts.mode);
  if (bind)
    sub.bind(opts.endpoint);
  else
    sub.connect(opts.endpoint);
  {
    std::lock_guard<std::mutex> lk(mu);
    sub_endpoint = sub.get(sockopt::last_endpoint);
  }
  log(log::level::info, "subscribed to engine KV events",
      {{"endpoint", opts.endpoint}, {"topic", opts.topic}, {"mode", bind ? "bind" : "connect"},
       {"replay_endpoint", opts.replay_endpoint}});
  signal_ready(std::string());

  // The cold-start replay waits for the first engine peer (tracker rule ST5): drain_monitor.
  while (!stop_flag.load(std::memory_order_relaxed)) {
    poll_once();
    publish_stats();
  }
}

void zmq_source::impl::poll_once() {
  auto now = clock::now();
  // An injected notice waits for the log's records: they happened before it.
  if (!log_replaying) deliver_injected();
  if (log_replaying && in_flight() < opts.max_in_flight && !over_budget()) replay_log_step();
  if (probe_pending && now >= probe_at) {
    probe_pending = false;
    tracker.on_probe_due(actions);
    execute();
  }
  // While the log is replayed the live socket waits (ZMQ queues it): the replay comes first.
  const bool throttle = in_flight() >= opts.max_in_flight || over_budget() || log_replaying;
  // Pacing: a reply asked for while the consumer is behind would only wait in memory (the
  // DEALER takes all of it), so a request waits for credits like the live socket does.
  const bool may_ask = !throttle;
  if (want_replay && !dealer && may_ask && now >= replay_not_before) open_replay(now);

  // Nothing due: wait on the sockets alone (stop() wakes the eventfd). -1 = no timeout.
  milliseconds timeout(-1);
  auto until = [&](clock::time_point t) {
    auto d = std::chrono::duration_cast<milliseconds>(t - now) + milliseconds(1);
    d = std::max(d, milliseconds(0));
    timeout = timeout.count() < 0 ? d : std::min(d, timeout);
  };
  if (dealer && !throttle && std::exchange(reader_paused, false))
    replay_deadline = std::max(replay_deadline, now + replay_patience());  // reading resumes
  if (throttle) {
    reader_paused = true;
    if (!log_replaying) ++throttled;
    until(now + milliseconds(4));  // credits and the budget are not pollable; look again soon
    // Kept ahead, so the poll below waits; by the stall timeout once the reply has begun, never
    // the request's: a reply the engine cut short is asked on from at the stall timeout after
    // the pause, not 2 s after it.
    if (dealer) replay_deadline = std::max(replay_deadline, now + replay_patience());
  }
  // After a spike the queues drain with nothing left to read: look again every 50 ms until the
  // gate has seen them drained and trimmed the heap (MG5).
  if (trim_watch && !throttle) until(now + milliseconds(50));
  if (want_replay && !dealer && may_ask) until(replay_not_before);
  if (dealer) until(replay_deadline);
  if (probe_pending) until(probe_at);
  // More of the log to replay and room for it: look at the sockets without waiting.
  if (log_replaying && in_flight() < opts.max_in_flight) timeout = milliseconds(0);

  std::array<zmq_pollitem_t, 4> items{};
  size_t n = 0;
  items[n++] = {nullptr, waker.fd, ZMQ_POLLIN, 0};
  items[n++] = {mon_sock->handle(), 0, ZMQ_POLLIN, 0};
  const size_t sub_idx = throttle ? max_parts : n;
  if (!throttle) items[n++] = {sub_sock->handle(), 0, ZMQ_POLLIN, 0};
  const size_t dealer_idx = (dealer && !throttle) ? n : max_parts;
  if (dealer && !throttle) items[n++] = {dealer->handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(items.data(), n, timeout);

  if (items[1].revents & ZMQ_POLLIN) drain_monitor(*mon_sock);
  if (sub_idx < n && (items[sub_idx].revents & ZMQ_POLLIN)) drain_sub(*sub_sock);
  if (dealer_idx < n && dealer && (items[dealer_idx].revents & ZMQ_POLLIN)) drain_dealer();

  now = clock::now();
  // A paused reader read nothing, so its silence ends no reply, however long the thread waited
  // for a CPU (a 0.2-core quota stops it 80 ms at a time); the reply gets its whole patience
  // again once reading resumes (above).
  if (dealer && !throttle && now >= replay_deadline) replay_timed_out();
}

void zmq_source::impl::drain_sub(zmq::socket_t& sub) {
  multipart mp;
  for (uint32_t i = 0; i < opts.max_drain; ++i) {
    if (in_flight() >= opts.max_in_flight || over_budget()) return;
    if (stop_flag.load(std::memory_order_relaxed)) return;
    if (!recv_multipart(sub, mp)) return;
    on_live(mp);
  }
}

void zmq_source::impl::on_live(multipart& mp) {
  ++frames.messages;
  // ROCm ATOM #869 builds publish [payload], or [topic, payload], with no sequence number
  // (ROCm/ATOM atom/distributed/kv_events.py ZmqEventPublisher._run @ 0290bb3f917f;
  // docs/producers.md): delivered as they come, past the tracker, which has nothing to order.
  // An 8-byte second frame is a seq without its payload, not a batch.
  if (mp.count == 1 || (mp.count == 2 && mp.part[1].size() != 8)) {
    zmq::message_t& payload = mp.part[mp.count - 1];
    ++frames.unsequenced;
    frames.bytes += payload.size();
    delivered.fetch_add(1, std::memory_order_relaxed);
    sink(charged(take_batch(payload, 0, false)));
    return;
  }
  if (mp.count != 3) return reject(frames.bad_frame_count, 0, "frame count", mp.count);
  if (mp.part[1].size() != 8) return reject(frames.bad_seq_size, 1, "seq size", mp.part[1].size());
  const uint64_t seq = read_be8(mp.part[1]);
  if (seq == end_marker) return reject(frames.reserved_seq, 2, "END seq on a live batch", seq);
  frames.bytes += mp.part[2].size();
  ring.on_live(seq, steady_ns());
  tracker.on_live(seq, take_batch(mp.part[2], seq, false), actions);
  execute();
}

void zmq_source::impl::drain_dealer() {
  multipart mp;
  for (uint32_t i = 0; i < opts.max_drain && dealer; ++i) {
    if (stop_flag.load(std::memory_order_relaxed) || over_budget()) return;
    if (!recv_multipart(*dealer, mp)) return;
    on_reply(mp);
    replay_deadline = clock::now() + replay_patience();
  }
}

void zmq_source::impl::on_reply(multipart& mp) {
  // DEALER view: ["", seq8, payload] (vLLM < 0.26, SGLang) or ["", topic, seq8, payload].
  if ((mp.count != 3 && mp.count != 4) || mp.part[0].size() != 0)
    return reject(frames.replay_malformed, 3, "replay reply shape", mp.count);
  zmq::message_t& seq_frame = mp.part[mp.count - 2];
  zmq::message_t& payload = mp.part[mp.count - 1];
  if (seq_frame.size() != 8)
    return reject(frames.replay_malformed, 3, "replay seq size", seq_frame.size());
  const uint64_t seq = read_be8(seq_frame);
  if (seq == end_marker) {
    uint64_t oldest = 0, latest = 0;
    const bool span = payload.size() != 0 && is_ring_span(payload, oldest, latest);
    if (payload.size() != 0 && !span)
      return reject(frames.replay_bad_end, 3, "replay END with payload", payload.size());
    if (span) ring.on_span(oldest, latest);
    ring.on_reply_end(true);  // RS1: the whole reply arrived
    replay_backoff.reset();
    close_replay();  // one DEALER per request: nothing late can leak into the next one
    want_replay = false;
    tracker.on_replay_end(actions);
  } else {
    replay_backoff.reset();  // an answer: the endpoint works
    ring.on_reply(seq);      // RS1
    tracker.on_replay(seq, take_batch(payload, seq, true), actions);
  }
  execute();
}

void zmq_source::impl::drain_monitor(zmq::socket_t& mon) {
  multipart mp;
  std::vector<ingress_event> out;
  for (int i = 0; i < 64 && recv_multipart(mon, mp); ++i) {
    if (mp.count < 2 || mp.part[0].size() < 6) continue;
    uint16_t event = 0;
    std::memcpy(&event, mp.part[0].data(), sizeof event);
    std::string addr(mp.part[1].data<char>(), mp.part[1].size());
    if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      ++connects;
      ++peers;
      log(log::level::info, "engine connected", {{"endpoint", addr}});
      out.emplace_back(connected_event{std::move(addr)});
    } else if (event == ZMQ_EVENT_DISCONNECTED) {
      ++disconnects;
      if (peers > 0) --peers;
      log(log::level::warn, "zmq recv failed; reconnecting", {{"endpoint", addr}});
      out.emplace_back(disconnected_event{std::move(addr)});
    }
  }
  // Whoever reacts to the event may read stats(): let them see the new connection state.
  publish_stats();
  for (auto& ev : out) sink(std::move(ev));
  // With a peer the subscription can take effect: now the cold-start replay may be asked for
  // (after the delta log's records, which come first).
  if (connects > 0 && !log_replaying) {
    tracker.start(actions);
    execute();
  }
}

void zmq_source::impl::execute() {
  for (auto& a : actions) {
    switch (a.kind) {
      case action_kind::deliver:
        // LF4: logged before anyone can act on it.
        if (opts.delta_log && a.payload)
          opts.delta_log->batch(a.seq, {a.payload->data, a.payload->size});
        delivered.fetch_add(1, std::memory_order_relaxed);
        sink(charged(std::move(a.payload)));
        break;
      case action_kind::gap_detected:
        log(log::level::warn, "sequence gap",
            {{"first_missing", std::to_string(a.seq)}, {"seen", std::to_string(a.seen)}});
        sink(gap_event{a.seq, a.seen, !opts.replay_endpoint.empty()});
        break;
      case action_kind::request_replay:
        close_replay();
        want_replay = true;
        replay_from = a.seq;
        replay_why = a.why;
        // Only a request that got no reply waits (jittered, doubling); every other one is asked
        // at once, as far as pacing allows (poll_once).
        replay_not_before = a.why == replay_reason::retry ? clock::now() + replay_backoff.next()
                                                          : clock::time_point{};
        break;
      case action_kind::cancel_replay:
        close_replay();
        want_replay = false;
        ring.on_reply_end(false);
        break;
      case action_kind::history_lost: {
        log(log::level::warn, "engine history lost; index will be cleared",
            {{"first_missing", std::to_string(a.seq)},
             {"first_available", std::to_string(a.first_available)},
             {"reason", to_string(a.reason)}});
        if (opts.delta_log)
          opts.delta_log->history_lost(a.seq, a.first_available, static_cast<uint8_t>(a.reason));
        ingress_notice n;
        n.what = ingress_notice::kind::history_lost;
        n.first_missing = a.seq;
        n.first_available = a.first_available;
        n.reason = to_string(a.reason);
        sink(std::make_shared<const ingress_notice>(n));
        break;
      }
      case action_kind::incarnation_reset: {
        log(log::level::warn, "engine sequence restarted; new incarnation",
            {{"previous_seq", std::to_string(a.previous_seq)}, {"new_seq", std::to_string(a.seq)}});
        if (opts.delta_log) opts.delta_log->reset(a.previous_seq, a.seq);
        ring.on_reset();  // RS3
        ingress_notice n;
        n.what = ingress_notice::kind::incarnation_reset;
        n.previous_seq = a.previous_seq;
        n.new_seq = a.seq;
        sink(std::make_shared<const ingress_notice>(n));
        break;
      }
      case action_kind::schedule_probe: {
        // Probe k waits initial·2^(k-1): quick while a subscription is probably still joining,
        // rare once it surely has.
        const auto k = std::min<uint64_t>(a.probe == 0 ? 1 : a.probe, 20);
        probe_pending = true;
        probe_at = clock::now() + opts.tail_probe_initial * (int64_t{1} << (k - 1));
        break;
      }
      case action_kind::first_batch:
        if (opts.delta_log) opts.delta_log->first_batch(a.seq);
        sink(history_event{a.seq});
        break;
    }
  }
  actions.clear();
}

// LR5: up to max_drain of the log's records per round, paced by the consumer's credits like live
// batches; a batch goes out as the raw_batch a live one would be (its segment's bytes owned).
void zmq_source::impl::replay_log_step() {
  for (uint32_t i = 0; i < opts.max_drain && log_replaying; ++i) {
    if (in_flight() >= opts.max_in_flight) return;
    std::string error;
    auto item = log_reader->next(error);
    if (!item) {
      log_replaying = false;
      log_reader.reset();
      if (!error.empty()) {
        // What was replayed stands; from there to where the ring is asked is gone: the consumer
        // clears (the writer stops, so the log never claims a history the index lacks).
        log_replay_error = error;
        if (opts.delta_log) opts.delta_log->close();
        log(log::level::error, "delta log unreadable during its replay; the pipeline clears",
            {{"error", error}, {"replayed_batches", std::to_string(log_replayed)}});
        ingress_notice n;
        n.what = ingress_notice::kind::history_lost;
        n.first_missing = log_next;
        n.first_available = opts.tracker.resume ? opts.tracker.resume->next : log_next;
        n.reason = "log_unreadable";
        sink(std::make_shared<const ingress_notice>(n));
      } else {
        log(log::level::info, "delta log replayed",
            {{"batches", std::to_string(log_replayed)}});
      }
      if (connects > 0) {
        tracker.start(actions);
        execute();
      }
      return;
    }
    const snapshot::log_record& r = item->record;
    switch (r.kind) {
      case snapshot::record_kind::batch: {
        auto b = std::make_shared<raw_batch>();
        b->seq = r.seq;
        b->replayed = true;
        b->owner = item->owner;
        b->data = r.payload.data();
        b->size = r.payload.size();
        ring.on_seen(r.seq);
        log_next = r.seq + 1;
        ++log_replayed;
        delivered.fetch_add(1, std::memory_order_relaxed);
        if (opts.budget) b->ticket = opts.budget->charge(budget_queue::ingress, b->size);
        sink(raw_batch_ptr(std::move(b)));
        break;
      }
      case snapshot::record_kind::first_batch: sink(history_event{r.seq}); break;
      case snapshot::record_kind::history_lost: {
        ingress_notice n;
        n.what = ingress_notice::kind::history_lost;
        n.first_missing = r.seq;
        n.first_available = r.first_available;
        // Said when it happened; a replayed one is only the clear it caused (never RD6 again).
        n.reason = to_string(loss_reason::history_lost);
        log_next = r.first_available;
        sink(std::make_shared<const ingress_notice>(n));
        break;
      }
      case snapshot::record_kind::asleep: {
        ingress_notice n;
        n.what = ingress_notice::kind::engine_asleep;
        sink(std::make_shared<const ingress_notice>(n));
        break;
      }
      default: break;  // begin, evidence, reset: nothing for the index (reader skips them)
    }
  }
}

void zmq_source::impl::deliver_injected() {
  std::vector<ingress_notice_ptr> mine;
  {
    std::lock_guard<std::mutex> lk(mu);
    if (injected.empty()) return;
    mine.swap(injected);
  }
  for (auto& n : mine) {
    if (opts.delta_log && n->what == ingress_notice::kind::engine_asleep) opts.delta_log->asleep();
    sink(std::move(n));
  }
}

void zmq_source::impl::open_replay(clock::time_point now) {
  dealer = std::make_unique<zmq::socket_t>(*ctx, zmq::socket_type::dealer);
  dealer->set(zmq::sockopt::linger, 0);
  // The ROUTER drops replies to a peer whose pipe is full. Unbounded (0), the engine's ring
  // bounds what one replay can send; bounded by the memory budget, the rest of a longer reply is
  // cut there and asked for again once the stall timeout sees it stop (ST10): a catch-up paced
  // by what kvrelay absorbs.
  dealer->set(zmq::sockopt::rcvhwm, std::max(opts.replay_rcvhwm, 0));
  if (opts.replay_endpoint.rfind("tcp://[", 0) == 0) dealer->set(zmq::sockopt::ipv6, 1);
  try {
    dealer->connect(opts.replay_endpoint);
  } catch (const zmq::error_t& e) {
    if (e.num() == ETERM) throw;
    // A replay endpoint ZMQ cannot dial (e.g. the engine's own "tcp://*:5558") is a config
    // error: say so loudly, and let the attempts run out so live traffic still flows.
    ++frames.replay_send_failed;
    log(log::level::error, "replay endpoint unusable",
        {{"endpoint", opts.replay_endpoint}, {"error", e.what()}});
    replay_timed_out();
    return;
  }
  const auto seq = be8(replay_from);
  // Without ZMQ_IMMEDIATE a connecting DEALER queues, so dontwait only fails on a real error.
  const bool sent =
      dealer->send(zmq::const_buffer(nullptr, 0), zmq::send_flags::sndmore |
                                                       zmq::send_flags::dontwait) &&
      dealer->send(zmq::const_buffer(seq.data(), seq.size()), zmq::send_flags::dontwait);
  if (!sent) ++frames.replay_send_failed;
  if (sent) ring.on_request(replay_from);
  replay_deadline = now + opts.replay_timeout;
  // A continuation is routine (an engine's reply past its high-water mark): debug, not info.
  log(replay_why == replay_reason::continue_ ? log::level::debug : log::level::info,
      "replay requested",
      {{"endpoint", opts.replay_endpoint}, {"from_seq", std::to_string(replay_from)},
       {"why", to_string(replay_why)}});
}

void zmq_source::impl::replay_timed_out() {
  const bool stalled = tracker.replay_answering();
  close_replay();
  ring.on_reply_end(false);  // RS1: cut short, or never answered
  if (stalled)
    log(log::level::debug, "replay reply stopped before its end marker; asking for the rest",
        {{"endpoint", opts.replay_endpoint}, {"from_seq", std::to_string(replay_from)}});
  else
    log(log::level::warn, "replay timed out; retrying",
        {{"endpoint", opts.replay_endpoint}, {"from_seq", std::to_string(replay_from)},
         {"failures", std::to_string(replay_backoff.attempts() + 1)}});
  tracker.on_replay_timeout(actions);
  execute();
}

void zmq_source::impl::publish_stats() {
  zmq_source_stats s;
  s.tracker = tracker.counters();
  s.frames = frames;
  s.in_flight = in_flight();
  s.throttled = throttled;
  s.overloads = gate.overloads();
  s.paused_ns = gate.paused_ns(steady_ns());
  s.overloaded = gate.paused();
  s.connects = connects;
  s.disconnects = disconnects;
  s.connected = peers > 0;
  s.live = tracker.live_confirmed() || frames.unsequenced > 0;  // a live batch, either way
  s.catching_up = tracker.replay_outstanding() || tracker.probing() || log_replaying;
  s.phase = tracker.phase();
  s.ring = ring.estimate();
  s.log_replayed = log_replayed;
  s.log_replaying = log_replaying;
  s.log_replay_error = log_replay_error;
  if (opts.ring) opts.ring->publish(s.ring);
  bool changed = false;
  {
    std::lock_guard<std::mutex> lk(mu);
    changed = !same(s, snapshot);
    snapshot = s;
  }
  if (changed && opts.on_change) opts.on_change();
}

// -- zmq_source: the owner's handle ------------------------------------------------------------

zmq_source::zmq_source(zmq_source_options opts, sink_fn sink)
    : impl_(std::make_shared<impl>(std::move(opts), std::move(sink))) {}

zmq_source::~zmq_source() { stop(); }

bool zmq_source::start(std::string* error) {
  auto fail = [&](std::string what) {
    if (error) *error = std::move(what);
    return false;
  };
  if (impl_->thread.joinable() || impl_->started_once) return fail("already started");
  if (impl_->opts.endpoint.empty()) return fail("no endpoint");
  impl_->started_once = true;
  try {
    impl_->ctx = impl_->opts.context ? impl_->opts.context : std::make_shared<zmq::context_t>(1);
  } catch (const zmq::error_t& e) {
    return fail(e.what());
  }
  impl_->alive.store(true);
  auto ready = impl_->ready.get_future();
  // The thread holds the impl (and through it the context) until it has closed its sockets.
  impl_->thread = std::thread([p = impl_] { p->run(); });
  std::string err = ready.get();
  if (!err.empty()) {
    impl_->thread.join();
    return fail(err);
  }
  return true;
}

void zmq_source::stop() {
  impl_->stop_flag.store(true);
  impl_->waker.wake();
  if (impl_->thread.joinable()) impl_->thread.join();
}

bool zmq_source::running() const noexcept { return impl_->alive.load(); }

void zmq_source::credit(uint32_t n) noexcept { impl_->opts.credits->credit(n); }

std::string zmq_source::sub_endpoint() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->sub_endpoint;
}

bool zmq_source::inject(ingress_notice_ptr n) {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->injected.push_back(std::move(n));
  }
  impl_->waker.wake();
  return true;
}

zmq_source_stats zmq_source::stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  zmq_source_stats s = impl_->snapshot;
  s.in_flight = impl_->in_flight();
  return s;
}

}  // namespace kvrelay::ingress
