// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/emitter/policy_client.hpp"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <exception>
#include <limits>
#include <atomic>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "base/read_file.hpp"
#include "base/tsan.hpp"
#include "proto/inferencecache/v1alpha1/inferencecache.grpc.pb.h"

namespace ic = inferencecache::v1alpha1;

namespace kvrelay {
namespace {

// Longest deadline accepted: gRPC deadlines are absolute time points, and an absurd value would
// only hide a configuration mistake.
constexpr std::chrono::milliseconds max_rpc_timeout = std::chrono::hours(1);

struct tls_material {
  std::string ca, cert, key;
};

// Reads one PEM file into `out` (base/read_file.hpp: regular, bounded, a BEGIN line); returns ""
// or the reason it is unusable.
std::string read_pem(const char* what, const std::string& path, std::string& out) {
  auto text = read_pem_file(path, std::string(what) + " '" + path + "'");
  if (!text) return text.error().context;
  out = std::move(text.value());
  return {};
}

// Everything `validate` checks, plus the file contents the channel needs.
std::string load(const client_options& o, tls_material& tls) {
  if (o.target.empty()) return "policy server target is empty";
  if (o.rpc_timeout.count() <= 0) return "rpc_timeout must be positive";
  if (o.rpc_timeout > max_rpc_timeout) return "rpc_timeout must be at most 1 h";
  if (o.max_reconnect_backoff.count() <= 0) return "max_reconnect_backoff must be positive";
  if (o.keepalive_time.count() < 0) return "keepalive_time must not be negative (0 = off)";
  if (o.keepalive_time.count() > 0 && o.keepalive_timeout.count() <= 0)
    return "keepalive_timeout must be positive";
  if (o.cert_file.empty() != o.key_file.empty())
    return "cert_file and key_file must be given together (mutual TLS)";
  if (o.ca_file.empty() && !o.tls) {
    // Silently ignoring these would send plaintext to someone who asked for TLS.
    if (!o.cert_file.empty()) return "cert_file/key_file need ca_file (TLS is off without it)";
    if (!o.server_name.empty()) return "server_name needs ca_file (TLS is off without it)";
    return {};
  }
  // Without ca_file, gRPC verifies against the system roots.
  if (!o.ca_file.empty())
    if (auto err = read_pem("ca_file", o.ca_file, tls.ca); !err.empty()) return err;
  if (o.cert_file.empty()) return {};
  if (auto err = read_pem("cert_file", o.cert_file, tls.cert); !err.empty()) return err;
  return read_pem("key_file", o.key_file, tls.key);
}

int clamp_ms(std::chrono::milliseconds d) {
  return static_cast<int>(
      std::min<std::chrono::milliseconds::rep>(d.count(), std::numeric_limits<int>::max()));
}

std::shared_ptr<grpc::Channel> make_channel(const client_options& o, const tls_material& tls) {
  grpc::ChannelArguments args;
  // A proxy from the environment must never see policy traffic (deps.md pitfall 13).
  args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
  // No retries of any kind: the owner decides what a failure means (R14). A DNS TXT service
  // config could otherwise switch retries on behind our back.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  args.SetInt(GRPC_ARG_SERVICE_CONFIG_DISABLE_RESOLUTION, 1);
  // A restarted emitter gets a fresh connection instead of inheriting a shared subchannel that
  // may be deep in reconnect backoff.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  const int max_backoff = clamp_ms(o.max_reconnect_backoff);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, max_backoff);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, std::min(1000, max_backoff));
  // A channel that was READY and is IDLE now has lost its transport (the reconnect rule, UQ9 of
  // unit_sequencer.hpp): gRPC's own idleness (30 min without calls) must not look the same.
  args.SetInt(GRPC_ARG_CLIENT_IDLE_TIMEOUT_MS, std::numeric_limits<int>::max());
  if (o.keepalive_time.count() > 0) {
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, clamp_ms(o.keepalive_time));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, clamp_ms(o.keepalive_timeout));
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  }

  // No channelz: nothing reads it, and its per-call bookkeeping was ~13 % of the client's CPU per
  // PublishEvent (bench_emitter, rpc mode).
  args.SetInt(GRPC_ARG_ENABLE_CHANNELZ, 0);
  // Not gRPC's minimal filter stack: it saved ~0.6 µs of ~17 per PublishEvent (bench_emitter
  // rpc-64) and drops the message-size and compression filters and, unless turned back on, the
  // client's own deadline checks; the ReportCacheState path and TLS would carry that risk too.
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (o.ca_file.empty() && !o.tls) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = tls.ca;
    ssl.pem_cert_chain = tls.cert;
    ssl.pem_private_key = tls.key;
    creds = grpc::SslCredentials(ssl);
    if (!o.server_name.empty()) args.SetSslTargetNameOverride(o.server_name);
  }
  return grpc::CreateCustomChannel(o.target, creds, args);
}

emitter::channel_state to_state(grpc_connectivity_state s) {
  using cs = emitter::channel_state;
  switch (s) {
    case GRPC_CHANNEL_IDLE:
      return cs::idle;
    case GRPC_CHANNEL_CONNECTING:
      return cs::connecting;
    case GRPC_CHANNEL_READY:
      return cs::ready;
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      return cs::transient_failure;
    case GRPC_CHANNEL_SHUTDOWN:
      return cs::shutdown;
  }
  return cs::shutdown;
}

// The connectivity watch ends at least this often to see its stop flag (gRPC's state watch
// cannot be cancelled): every slice is a gRPC timer wake-up, and 250 ms slices were half of an
// idle daemon's wake-ups; a client's destructor waits up to one slice for the watch.
constexpr auto watch_slice = std::chrono::milliseconds(1000);

// The client whose callback this thread is running, if any: destroying that client from inside
// its own callback would wait for itself forever, so the destructor turns that into a loud abort.
thread_local const void* t_in_callback_of = nullptr;
// Set on the shared completion thread: a client destroyed there would wait for a watch event
// only that thread can deliver.
thread_local bool t_on_completion_thread = false;

// What every call keeps alive until its callback has run: the context (which TryCancel needs),
// the user's callback and the start time. Calls in flight are linked into the client's registry
// through `prev`/`next` (no node to allocate per call) and own themselves through `self` until
// `complete` unlinks them.
struct call_base {
  virtual ~call_base() = default;
  grpc::ClientContext ctx;
  policy_client::callback done;
  std::chrono::steady_clock::time_point start;
  ic::Ack ack;
  std::shared_ptr<call_base> self;
  call_base* prev = nullptr;
  call_base* next = nullptr;
};

// What comes back on the shared completion queue: each tag knows what its event means.
struct cq_tag {
  virtual void on_cq_event(bool ok) = 0;

 protected:
  ~cq_tag() = default;
};

// One completion queue, drained by one thread, for every client of the process: PublishEvent
// completions and the connectivity watches. A thread per client made each extra target bring a
// poller of its own, a fifth of what each extra target cost with three. Made by the
// first client that needs it; the last one to let go shuts the queue down and joins the thread
// (each client lets go only once its own calls and watch are done, so nothing is left queued).
class completion_thread {
 public:
  static std::shared_ptr<completion_thread> acquire() {
    static std::mutex m;
    static std::weak_ptr<completion_thread> current;
    std::lock_guard<std::mutex> lk(m);
    if (auto p = current.lock()) return p;
    auto p = std::shared_ptr<completion_thread>(new completion_thread());
    current = p;
    return p;
  }
  completion_thread(const completion_thread&) = delete;
  completion_thread& operator=(const completion_thread&) = delete;
  ~completion_thread() {
    queue_->Shutdown();
    // Let go from one of its own completions (the thread keeps the queue alive): no self-join.
    if (thread_.get_id() == std::this_thread::get_id())
      thread_.detach();
    else
      thread_.join();
  }
  grpc::CompletionQueue* cq() const { return queue_.get(); }

 private:
  completion_thread()
      : queue_(std::make_shared<grpc::CompletionQueue>()), thread_([q = queue_] {
          pthread_setname_np(pthread_self(), "kvr.publish");
          t_on_completion_thread = true;
          void* tag = nullptr;
          bool ok = false;
          // Every tag comes back exactly once (a watch's ok says whether the state changed; a
          // publish's is always true, cancelled calls included).
          while (q->Next(&tag, &ok)) {
            tsan::handoff_consume();
            static_cast<cq_tag*>(tag)->on_cq_event(ok);
          }
        }) {}

  std::shared_ptr<grpc::CompletionQueue> queue_;
  std::thread thread_;  // last: starts once the queue exists
};

}  // namespace

struct encoded_stream {
  std::vector<grpc::ByteBuffer> messages;
  std::size_t bytes = 0;
};

struct policy_client::impl {
  client_options opts;
  // The deadline of calls begun from now on: opts.rpc_timeout until set_rpc_timeout.
  std::atomic<int64_t> timeout_ms{0};
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<ic::InferenceCache::Stub> stub;
  // ReportCacheState with messages serialized beforehand (report_encoded): the typed stub would
  // serialize them again for every server. The wire does not say a call's kind, so the server's
  // client-streaming handler takes it as any other.
  std::unique_ptr<grpc::GenericStub> generic;
  std::string report_method;  // "/<package>.InferenceCache/ReportCacheState"

  mutable std::mutex mu;
  std::condition_variable idle;
  // Registry of calls in flight (an intrusive list; each owns itself through `self`): the
  // destructor cancels exactly these.
  call_base* calls = nullptr;
  // Calls not yet fully finished: callback returned AND call object destroyed. Counted apart
  // from `calls` because the object must die before the destructor may proceed (see complete).
  std::size_t pending = 0;

  // Every call and the connectivity watch run on the process's completion queue, drained by
  // one thread that blocks in Next (no polling while idle; acquired by the first call or
  // watch_connectivity). On the callback API each unary call hopped across gRPC's callback
  // threads and its executor, and a watcher thread of its own in WaitForStateChange took turns
  // with them at polling the socket; here the thread in Next reads the transport and runs the
  // completions itself.
  std::shared_ptr<completion_thread> completions;
  std::once_flag cq_started;
  grpc::CompletionQueue* start_cq();

  // The connectivity watch: one NotifyOnStateChange armed at a time, tagged &watch_tag.
  struct watch_event final : cq_tag {
    explicit watch_event(impl* o) : owner(o) {}
    void on_cq_event(bool ok) override { owner->on_watch(ok); }  // ok: the state changed
    impl* owner;
  };
  watch_event watch_tag{this};
  std::function<void(emitter::channel_state)> on_change;  // set once, before the first arm
  grpc_connectivity_state last_state = GRPC_CHANNEL_SHUTDOWN;  // the cq thread's only
  bool watch_armed = false;                                    // under mu
  std::atomic<bool> stop_watching{false};
  void arm_watch(grpc_connectivity_state last);
  void on_watch(bool changed);

  // Arms the deadline and registers the call; must precede handing the context to gRPC.
  void begin(const std::shared_ptr<call_base>& c, callback done) {
    c->done = done ? std::move(done) : [](rpc_result) {};
    c->start = std::chrono::steady_clock::now();
    // A monotonic deadline: a wall-clock step must not expire or stretch calls in flight.
    c->ctx.set_deadline(gpr_time_add(
        gpr_now(GPR_CLOCK_MONOTONIC),
        gpr_time_from_millis(timeout_ms.load(std::memory_order_relaxed), GPR_TIMESPAN)));
    std::lock_guard<std::mutex> lk(mu);
    c->self = c;
    c->next = calls;
    if (calls) calls->prev = c.get();
    calls = c.get();
    ++pending;
  }

  // Runs on the completion thread: the user's callback, then the call object's destruction,
  // then the count that releases the destructor, in that order.
  // - Callback before the count: no callback can run after ~policy_client returns.
  // - Destruction before the count: a ClientContext holds a reference to the grpc::Channel. If
  //   the last one were dropped here, after the owner let go of the channel, the channel would
  //   be destroyed on gRPC's own callback thread, which then tries to join itself and crashes
  //   (observed: "assertion failed: prior > 0" in grpc_cq_internal_unref; grpc/grpc#32584).
  // Nothing may touch `this` after the final unlock: the destructor may be waiting for it.
  void complete(call_base* c, const grpc::Status& s) {
    rpc_result r;
    r.code = static_cast<int>(s.error_code());
    r.message = s.error_message();
    r.accepted = s.ok() && c->ack.accepted();
    r.latency = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - c->start);
    {
      auto done = std::move(c->done);
      const void* outer = t_in_callback_of;  // a callback may complete another client's call
      t_in_callback_of = this;
      try {
        done(std::move(r));
      } catch (...) {
        // An exception cannot propagate into gRPC's thread; swallowing it keeps the
        // bookkeeping below intact so the destructor cannot hang.
      }
      t_in_callback_of = outer;
      // `done` (and whatever it captured) is destroyed here, before the destructor can return.
    }
    std::shared_ptr<call_base> keep;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (c->prev)
        c->prev->next = c->next;
      else
        calls = c->next;
      if (c->next) c->next->prev = c->prev;
      keep = std::move(c->self);
    }
    // Usually the last reference (the destructor may briefly hold another while cancelling, and
    // then drops it on its own thread). May destroy the reactor whose OnDone called us.
    keep.reset();
    std::lock_guard<std::mutex> lk(mu);
    if (--pending == 0) idle.notify_all();
  }

  struct encoded_call;
  struct publish_call;
};

// One ReportCacheState stream of messages serialized beforehand, shared with other calls, on the
// process's completion queue: the thread in Next reads the transport and runs each step itself.
// On the callback API every step (each write, the Ack, the status) hopped from the thread that
// polled to one of gRPC's callback threads: two wake-ups a step, for every target.
// The HEADERS are corked into the first write (uncorked they took a sendmsg of their own, a
// third of a unit's) and the last message carries the half-close; the Ack's read and the status
// are asked for before it (gRPC holds them until the HEADERS go out).
// The issuing thread starts the call and its first write, the completion thread does the rest:
// the call's mutex orders the two, which ThreadSanitizer cannot see through gRPC's queue (the
// wrapper's op sets are written by both). Nothing completes inline on the async API, so a step
// never finds its own thread holding the lock.
struct policy_client::impl::encoded_call final : call_base {
  // The step's handler says whether the call is over; it completes once the lock is let go
  // (complete() may destroy the call, its mutex with it).
  struct step final : cq_tag {
    step(encoded_call* c, bool (encoded_call::*f)(bool)) : call(c), fn(f) {}
    void on_cq_event(bool ok) override {
      bool over = false;
      {
        std::lock_guard<std::mutex> lk(call->mu);
        over = (call->*fn)(ok);
      }
      if (over) call->finish();
    }
    encoded_call* call;
    bool (encoded_call::*fn)(bool);
  };
  encoded_call(impl* o, std::shared_ptr<const encoded_stream> s)
      : owner(o), stream(std::move(s)) {}
  // Under mu.
  void write_next() {
    const auto& m = stream->messages;
    const grpc::ByteBuffer& b = m[written++];
    if (written == m.size())
      rw->WriteLast(b, grpc::WriteOptions(), static_cast<cq_tag*>(&wrote));
    else
      rw->Write(b, static_cast<cq_tag*>(&wrote));
  }
  bool on_written(bool ok) {
    // Not ok: the stream broke; the status says why.
    if (ok && written < stream->messages.size()) {
      write_next();
      return false;
    }
    writes_done = true;
    return over();
  }
  bool on_read(bool ok) {
    got_reply = ok;
    read_done = true;
    return over();
  }
  bool on_finished(bool) {
    status_in = true;
    return over();
  }
  bool over() const { return writes_done && read_done && status_in; }
  void finish() {
    if (status.ok() && got_reply &&
        !grpc::SerializationTraits<ic::Ack>::Deserialize(&reply, &ack).ok())
      ack.Clear();  // not an Ack: not accepted
    owner->complete(this, status);
  }
  impl* owner;
  std::shared_ptr<const encoded_stream> stream;
  std::mutex mu;
  std::size_t written = 0;
  grpc::ByteBuffer reply;
  grpc::Status status;
  bool got_reply = false, read_done = false, writes_done = false, status_in = false;
  step wrote{this, &encoded_call::on_written};
  step read{this, &encoded_call::on_read};
  step finished{this, &encoded_call::on_finished};
  // In the call's arena (its delete frees nothing); declared after the context's base, so it
  // goes first.
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> rw;
};

// One PublishEvent on the client's completion queue. The request is serialized when the call is
// prepared, so nothing of the caller's is kept. `rpc` lives in the call's arena (its delete
// frees nothing) and is declared after the context's base, so it goes first.
struct policy_client::impl::publish_call final : call_base, cq_tag {
  explicit publish_call(impl* o) : owner(o) {}
  void on_cq_event(bool) override { owner->complete(this, status); }
  impl* owner;
  std::unique_ptr<grpc::ClientAsyncResponseReader<ic::Ack>> rpc;
  grpc::Status status;
};

grpc::CompletionQueue* policy_client::impl::start_cq() {
  std::call_once(cq_started, [this] { completions = completion_thread::acquire(); });
  return completions->cq();
}

void policy_client::impl::arm_watch(grpc_connectivity_state last) {
  channel->NotifyOnStateChange(last, std::chrono::system_clock::now() + watch_slice,
                               completions->cq(), static_cast<cq_tag*>(&watch_tag));
}

// The watch fired (`changed`, or the slice ended): report a change, and re-arm unless stopping.
void policy_client::impl::on_watch(bool changed) {
  if (stop_watching.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lk(mu);
    watch_armed = false;
    idle.notify_all();
    return;
  }
  const grpc_connectivity_state now = channel->GetState(false);
  // A watch armed on READY that fired for a change (not its deadline) but reads READY again saw
  // the transport lost and rebuilt before this thread ran (a loaded machine, a server that came
  // back at once): report the loss it missed, so the next READY counts as a reconnect (UQ9).
  if (changed && now == GRPC_CHANNEL_READY && last_state == GRPC_CHANNEL_READY) {
    on_change(emitter::channel_state::idle);
    on_change(emitter::channel_state::ready);
  } else if (now != last_state) {
    last_state = now;
    on_change(to_state(now));
  }
  // A lost transport leaves the channel IDLE; nothing reconnects it until a call is made, and a
  // quiet engine makes none. Reconnecting here is what lets a server that restarted during the
  // silence be noticed.
  if (now == GRPC_CHANNEL_IDLE) channel->GetState(true);
  arm_watch(now);
}

namespace {

rpc_result invalid_argument(const char* what) {
  rpc_result r;
  r.code = static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT);
  r.message = what;
  return r;
}

}  // namespace

std::string policy_client::validate(const client_options& opts) {
  tls_material tls;
  try {
    return load(opts, tls);
  } catch (const std::exception& e) {
    return std::string("invalid policy client options: ") + e.what();
  }
}

std::unique_ptr<policy_client> policy_client::make(const client_options& opts,
                                                   std::string& error) {
  try {
    tls_material tls;
    error = load(opts, tls);
    if (!error.empty()) return nullptr;
    auto p = std::make_unique<impl>();
    p->opts = opts;
    p->timeout_ms = static_cast<int64_t>(opts.rpc_timeout.count());
    p->channel = make_channel(opts, tls);
    p->stub = ic::InferenceCache::NewStub(p->channel);
    p->generic = std::make_unique<grpc::GenericStub>(p->channel);
    p->report_method =
        "/" + std::string(ic::InferenceCache::service_full_name()) + "/ReportCacheState";
    return std::unique_ptr<policy_client>(new policy_client(std::move(p)));
  } catch (const std::exception& e) {
    error = std::string("cannot create policy client: ") + e.what();
    return nullptr;
  }
}

policy_client::policy_client(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

policy_client::~policy_client() {
  if (t_in_callback_of == impl_.get() || t_on_completion_thread) {
    // A programming error (e.g. a callback holding the last shared_ptr to its client); waiting
    // would deadlock silently, so fail where it can be seen.
    std::fputs("kvrelay: policy_client destroyed from inside its own callback or on the "
               "completion thread\n", stderr);
    std::abort();
  }
  impl_->stop_watching = true;
  {
    std::unique_lock<std::mutex> lk(impl_->mu);
    impl_->idle.wait(lk, [this] { return !impl_->watch_armed; });
  }
  std::vector<std::shared_ptr<call_base>> live;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    live.reserve(impl_->pending);
    for (call_base* c = impl_->calls; c; c = c->next) live.push_back(c->self);
  }
  // Outside the lock: gRPC may run a completion inline on this thread, and completion takes
  // the lock. The references in `live` keep each context valid while it is cancelled.
  for (auto& c : live) c->ctx.TryCancel();
  live.clear();
  {
    std::unique_lock<std::mutex> lk(impl_->mu);
    impl_->idle.wait(lk, [this] { return impl_->pending == 0; });
  }
  // Every call and the watch are done: nothing of this client is left on the shared queue.
  impl_->completions.reset();
}

void policy_client::report(std::shared_ptr<const ic::CacheStateUpdate> msg, callback done) {
  if (!msg) {
    if (done) done(invalid_argument("report: null CacheStateUpdate"));
    return;
  }
  // One message per stream, and the write carries the half-close (spec §2: one stream per flush).
  struct one final : update_source {
    explicit one(const ic::CacheStateUpdate* m) : msg(m) {}
    const ic::CacheStateUpdate* next() override { return std::exchange(msg, nullptr); }
    const ic::CacheStateUpdate* msg;
  } src(msg.get());
  report_encoded(encode(src), std::move(done));
}

std::shared_ptr<const encoded_stream> policy_client::encode(update_source& src) {
  auto s = std::make_shared<encoded_stream>();
  while (const ic::CacheStateUpdate* m = src.next()) {
    // One size pass per message. gRPC's own SerializationTraits sizes the message, then (past
    // an inlined slice's few bytes) serializes it through a stream that sizes it all again:
    // every entry's ByteSizeLong twice. Here the size is taken once, cached in the message, and
    // the bytes written straight into one slice of that length; the bytes are the same.
    const size_t size = m->ByteSizeLong();
    // Only a message over 2 GiB, which the port's cut (max_bytes_per_message) rules out; such
    // a message is left out rather than sent torn.
    if (size > static_cast<size_t>(std::numeric_limits<int>::max())) continue;
    grpc::Slice slice(size);
    uint8_t* begin = const_cast<uint8_t*>(slice.begin());
    if (m->SerializeWithCachedSizesToArray(begin) != begin + size) continue;
    s->bytes += size;
    s->messages.emplace_back(&slice, 1);
  }
  return s;
}

std::shared_ptr<const encoded_stream> policy_client::encode(wire_source& src) {
  auto s = std::make_shared<encoded_stream>();
  while (const size_t size = src.next_size()) {
    grpc::Slice slice(size);
    src.write(const_cast<uint8_t*>(slice.begin()));
    s->bytes += size;
    s->messages.emplace_back(&slice, 1);
  }
  return s;
}

std::size_t policy_client::messages_in(const encoded_stream& s) { return s.messages.size(); }
std::size_t policy_client::bytes_in(const encoded_stream& s) { return s.bytes; }

void policy_client::report_encoded(std::shared_ptr<const encoded_stream> s, callback done) {
  if (!s || s->messages.empty()) {
    if (done) done(invalid_argument("report_encoded: no message"));
    return;
  }
  grpc::CompletionQueue* cq = impl_->start_cq();
  auto c = std::make_shared<impl::encoded_call>(impl_.get(), std::move(s));
  impl_->begin(c, std::move(done));
  c->ctx.set_initial_metadata_corked(true);  // StartCall then sends nothing and returns no tag
  tsan::handoff_publish();  // the call as built: its tags reach the completion thread via gRPC
  std::lock_guard<std::mutex> lk(c->mu);
  c->rw = impl_->generic->PrepareCall(&c->ctx, impl_->report_method, cq);
  c->rw->StartCall(nullptr);
  c->rw->Read(&c->reply, static_cast<cq_tag*>(&c->read));
  c->rw->Finish(&c->status, static_cast<cq_tag*>(&c->finished));
  c->write_next();  // with the HEADERS
}

void policy_client::publish(std::shared_ptr<const ic::CacheEvent> ev, callback done) {
  if (!ev) {
    if (done) done(invalid_argument("publish: null CacheEvent"));
    return;
  }
  publish(*ev, std::move(done));
}

void policy_client::publish(const ic::CacheEvent& ev, callback done) {
  grpc::CompletionQueue* cq = impl_->start_cq();
  auto c = std::make_shared<impl::publish_call>(impl_.get());
  impl_->begin(c, std::move(done));
  c->rpc = impl_->stub->PrepareAsyncPublishEvent(&c->ctx, ev, cq);
  tsan::handoff_publish();  // the call reaches the completion thread through gRPC's queue
  c->rpc->StartCall();
  c->rpc->Finish(&c->ack, &c->status, static_cast<cq_tag*>(c.get()));  // the tag Next gives back
}

std::size_t policy_client::in_flight() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->pending;
}

std::string policy_client::channel_state() const { return emitter::to_string(state()); }

emitter::channel_state policy_client::state() const {
  return to_state(impl_->channel->GetState(false));
}

void policy_client::try_connect() { impl_->channel->GetState(true); }

void policy_client::watch_connectivity(std::function<void(emitter::channel_state)> on_change) {
  if (!on_change) return;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (impl_->on_change) return;  // once per client
    impl_->on_change = std::move(on_change);
    impl_->watch_armed = true;
  }
  impl_->start_cq();
  tsan::handoff_publish();  // on_change, read on the queue's thread
  // Armed with a state the live channel is never in, the watch fires at once: the first report
  // (the current state) runs on the queue's thread like every later one.
  impl_->arm_watch(GRPC_CHANNEL_SHUTDOWN);
}

const client_options& policy_client::options() const { return impl_->opts; }

void policy_client::set_rpc_timeout(std::chrono::milliseconds t) {
  const auto ms = std::clamp<int64_t>(t.count(), 1, max_rpc_timeout.count());
  impl_->timeout_ms.store(ms, std::memory_order_relaxed);
}

}  // namespace kvrelay
