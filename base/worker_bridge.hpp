// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The one way work leaves an actor's thread and its result comes back: blocking work (a GET, a
// DNS resolve, a file write) runs on a worker thread, and each result is handed to `deliver`,
// which the owner gave at construction (an actor shell's sends a message to itself). No CAF here:
// the shell's `deliver` holds its handle.
//
//  WB1. A result is delivered only while the bridge is open: `deliver` runs under the bridge's
//       lock, and closing (the destructor) drops it under that lock, so once the destructor has
//       run nothing is delivered — the owner, and at shutdown the actor system, may be gone.
//  WB2. Dropping `deliver` releases what it holds (the owner's handle): a worker still running
//       keeps no actor alive.
//  WB3. `serial`: one thread runs the jobs in the order submitted. `per_job`: each job gets a
//       thread of its own, so one slow job (a hung engine's GET) delays no other.
//  WB4. At close, jobs not started are dropped. `detach`: a running job finishes alone (a GET to a
//       hung engine lasts its whole timeout; joining it would hold a CAF scheduler thread and the
//       shutdown that long). `join` (serial only; per_job threads are always detached): the
//       destructor waits for it (bounded work whose end the owner's shutdown relies on).
//  WB5. `skip_when_busy`: a submit while a job is queued or running is refused (false), not
//       queued (a periodic scrape skips a tick rather than pile up).
//  WB6. A job queued `replaceable` takes the place of a replaceable job queued last and not
//       started (the newest snapshot cut wins over an older one still waiting); one queued
//       `replacing` does too but is not replaceable itself (the shutdown's last write).
//  WB7. The hand-off is visible to ThreadSanitizer: a result is published (base/tsan.hpp) right
//       before `deliver`, and the owner consumes it where the result arrives.

#include <pthread.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "base/tsan.hpp"

namespace kvrelay {

struct worker_options {
  enum class threads { serial, per_job };
  enum class on_close { detach, join };
  const char* thread_name = "kvr.worker";  // top -H; at most 15 characters
  threads threading = threads::serial;
  on_close closing = on_close::detach;
  bool skip_when_busy = false;  // WB5 (serial only)
};

enum class queueing { append, replaceable, replacing };  // WB6

template <class Result>
class worker_bridge {
 public:
  using job_fn = std::function<Result()>;
  using deliver_fn = std::function<void(Result)>;

  worker_bridge(worker_options o, deliver_fn deliver)
      : opts_(o), s_(std::make_shared<shared>(std::move(deliver))) {
    if (opts_.threading == worker_options::threads::serial) {
      thread_ = std::thread([s = s_, name = opts_.thread_name] {
        pthread_setname_np(pthread_self(), name);
        serial_loop(*s);
      });
      if (opts_.closing == worker_options::on_close::detach) thread_.detach();
    }
  }
  worker_bridge(const worker_bridge&) = delete;
  worker_bridge& operator=(const worker_bridge&) = delete;

  ~worker_bridge() {
    deliver_fn dropped;  // WB2: released outside the lock
    {
      std::lock_guard<std::mutex> lk(s_->mu);
      s_->open = false;  // WB1
      dropped = std::move(s_->deliver);
      s_->deliver = nullptr;
      s_->jobs.clear();  // WB4
    }
    s_->cv.notify_all();
    if (thread_.joinable()) thread_.join();  // WB4: join
  }

  /// Queues `job`; false when refused (WB5), closed, or the thread could not be started (per_job).
  bool submit(job_fn job, queueing how = queueing::append) {
    if (opts_.threading == worker_options::threads::per_job) {
      try {
        std::thread([s = s_, j = std::move(job), name = opts_.thread_name] {
          pthread_setname_np(pthread_self(), name);
          s->finish(j());
        }).detach();
      } catch (const std::system_error&) {
        return false;
      }
      return true;
    }
    {
      std::lock_guard<std::mutex> lk(s_->mu);
      if (!s_->open) return false;
      if (opts_.skip_when_busy && (s_->running || !s_->jobs.empty())) return false;  // WB5
      const bool replaceable = how == queueing::replaceable;
      if (how != queueing::append && !s_->jobs.empty() && s_->jobs.back().replaceable)  // WB6
        s_->jobs.back() = queued{std::move(job), replaceable};
      else
        s_->jobs.push_back(queued{std::move(job), replaceable});
    }
    s_->cv.notify_all();
    return true;
  }

 private:
  struct queued {
    job_fn run;
    bool replaceable = false;
  };
  struct shared {
    explicit shared(deliver_fn d) : deliver(std::move(d)) {}
    std::mutex mu;
    std::condition_variable cv;
    std::deque<queued> jobs;
    deliver_fn deliver;
    bool open = true;
    bool running = false;

    void finish(Result r) {
      std::lock_guard<std::mutex> lk(mu);
      running = false;
      if (!open || !deliver) return;  // WB1
      tsan::handoff_publish();        // WB7
      deliver(std::move(r));
    }
  };

  static void serial_loop(shared& s) {
    for (;;) {
      job_fn job;
      {
        std::unique_lock<std::mutex> lk(s.mu);
        s.cv.wait(lk, [&s] { return !s.open || !s.jobs.empty(); });
        if (!s.open) return;
        job = std::move(s.jobs.front().run);
        s.jobs.pop_front();
        s.running = true;
      }
      // The job (and what it captured) is gone before the result is delivered.
      Result r = std::exchange(job, nullptr)();
      s.finish(std::move(r));
    }
  }

  worker_options opts_;
  std::shared_ptr<shared> s_;
  std::thread thread_;  // serial only; joinable only with on_close::join
};

}  // namespace kvrelay
