// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Discovery of one engine over time, the pure half of the discovery actor: when to
// ask the engine where its publishers are, what to make of the answer, when the pipelines must
// be retargeted, what readiness says meanwhile and what to log. No sockets, no CAF, no clock:
// the shell runs the fetches off actor threads, keeps the timers, and feeds results back.
//
// States: waiting (no usable answer yet: no pipelines), discovered (pipelines run on the last
// target), retrying (the last fetch failed after a target was known: the pipelines keep it),
// configured (no usable answer yet, and the request has a fallback: the pipelines run on the
// configured settings, DP8).
//
// Rules:
//  DP1. start(): fetch now; readiness says "waiting for engine <url>: not answered yet".
//  DP2. At most one fetch is outstanding. A result that arrives with none outstanding is stale
//      and ignored; so is a timer whose generation is not the current one (a newer decision
//      replaced it: timers cannot be cancelled).
//  DP3. A good answer is merged with the explicit settings (discovery_merge.hpp). The first
//      one, and every later one whose pipelines differ (endpoints, rank set, identity), is a
//      `retarget` with the new target; an unchanged one is nothing. State discovered; the
//      backoff starts over; readiness's reason is cleared. Conflicts and notes are logged once
//      each (per distinct text, for the process' life; at most 256 remembered).
//  DP4. A failed fetch, or an answer the merge refuses: fetch again after the backoff
//      (base/backoff.hpp, from retry_initial, capped at retry_max). Without a target the
//      state is waiting and readiness says "waiting for engine <url>: <error>"; with one, the
//      state is retrying and the pipelines keep running on the old target (readiness is
//      theirs). An error is logged when it differs from the last one logged (rate limited:
//      at most 5 distinct errors a minute), a repeat only counted; the recovery is logged.
//  DP5. A stream stopped (rank, why: disconnected, incarnation reset, events silent while the
//      engine's /metrics show activity): the rank is marked stopped and the sources are read
//      again, now, unless a fetch or its retry timer is already pending. A stop during an
//      outstanding fetch asks for one more fetch when it returns (that answer may predate the
//      engine's restart), so ranks stopping together cost two fetches, never one per rank.
//  DP6. While a rank is stopped and answers keep saying the same, ask again after the backoff:
//      a restarted engine may answer before it moved its publishers (or with the old answer
//      cached). A retarget clears the stopped marks (new pipelines, new streams); a stream
//      that flows again clears its own, and with none left the polling ends.
//  DP7. Stops and flows of ranks not in the target, and any of them before the first target,
//      are ignored (there is nothing to re-read for).
//  DP8. A request with a `fallback` (an engine whose URL was derived from its metrics URL: the
//      Go sidecar's flags, which must work with an engine that says nothing): a failure before
//      any answer retargets to the fallback at once (state configured; readiness is the
//      pipelines'), logged once, and the engine is asked again with the backoff. A later good
//      answer is merged as in DP3 and always sent as a retarget, even with the same pipelines
//      (the daemon then only takes the new origins). Failures after a discovered target are
//      DP4's: the pipelines keep the discovered target, never the fallback again.

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "actors/discovery/discovery_merge.hpp"
#include "actors/discovery/engine_discovery.hpp"
#include "base/backoff.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/rate_limiter.hpp"
#include "messages/discovery.hpp"

namespace kvrelay::discovery {

enum class watch_state : uint8_t { waiting, discovered, retrying, configured };
const char* to_string(watch_state s) noexcept;

struct watch_options {
  std::chrono::milliseconds retry_initial{250};
  std::chrono::milliseconds retry_max{30'000};  // engine.discovery_retry_max
  uint64_t seed = 1;                            // the backoff's jitter
};

struct watch_action {
  enum class kind : uint8_t {
    fetch,      // start a fetch now (delay 0) or after `delay` with timer generation `gen`
    retarget,   // `target`: the pipelines to run from now on (first target included)
    readiness,  // `text`: why the engine is not ready ("" = discovery no longer in the way)
    log,        // `level`, `text`, `fields`
  };
  kind what = kind::fetch;
  std::chrono::milliseconds delay{0};
  uint64_t gen = 0;
  std::shared_ptr<const discovered_target> target;
  std::string text;
  log::level level = log::level::info;
  std::vector<log::field> fields;
};
using watch_actions = std::vector<watch_action>;

struct watch_counters {
  uint64_t fetches = 0;      // fetches started
  uint64_t failures = 0;     // failed fetches and refused answers
  uint64_t retargets = 0;    // retarget actions (the first target included)
  uint64_t stops = 0;        // stream stops heard
  uint64_t suppressed = 0;   // error lines not written (repeats, rate limit)
};

class engine_watch {
 public:
  engine_watch(engine_request req, watch_options opts = {});

  /// DP1.
  void start(watch_actions& out);
  /// A fetch's result (DP2-DP4, DP6). `now_ms`: steady ms, for the log rate limit.
  void on_fetched(const outcome<discovered_engine>& r, int64_t now_ms, watch_actions& out);
  /// A fetch timer of generation `gen` fired (DP2).
  void on_timer(uint64_t gen, watch_actions& out);
  /// DP5, DP7.
  void on_stream_stopped(int64_t rank, const std::string& why, watch_actions& out);
  /// DP6, DP7.
  void on_stream_flowing(int64_t rank);

  watch_state state() const noexcept { return state_; }
  bool fetching() const noexcept { return in_flight_; }
  /// The current target; null before the first.
  const std::shared_ptr<const discovered_target>& target() const noexcept { return target_; }
  const std::string& last_error() const noexcept { return last_error_; }
  /// "waiting for engine <url>: ..." while waiting, else "".
  const std::string& waiting_reason() const noexcept { return waiting_; }
  const engine_request& request() const noexcept { return req_; }
  const watch_counters& counters() const noexcept { return c_; }
  const std::set<int64_t>& stopped_ranks() const noexcept { return stopped_; }
  /// Failed fetches (and refused answers) since the last good answer: the retries so far.
  uint64_t failures_in_a_row() const noexcept { return failures_in_a_row_; }

 private:
  void fetch_now(watch_actions& out);
  void fetch_later(watch_actions& out);
  void failed(const failure& f, int64_t now_ms, watch_actions& out);
  void succeeded(discovered_target t, watch_actions& out);
  void run_configured(watch_actions& out);
  void set_waiting(std::string reason, watch_actions& out);
  void log_once(log::level l, const std::string& text, watch_actions& out);
  bool has_rank(int64_t rank) const;

  engine_request req_;
  watch_options opts_;
  backoff backoff_;
  rate_limiter error_lines_{5, 60'000};
  watch_state state_ = watch_state::waiting;
  std::shared_ptr<const discovered_target> target_;
  bool in_flight_ = false;
  bool again_ = false;        // DP5: a stop arrived during the outstanding fetch
  bool timer_pending_ = false;
  uint64_t gen_ = 0;
  std::set<int64_t> stopped_;
  std::string last_error_;
  std::string last_logged_error_;
  uint64_t failures_in_a_row_ = 0;
  std::string waiting_;
  std::set<std::string> logged_;  // DP3: conflict and note lines already written
  watch_counters c_;
};

}  // namespace kvrelay::discovery
