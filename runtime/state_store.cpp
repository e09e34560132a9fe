// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "runtime/state_store.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "actors/scraper/metric_profile.hpp"
#include "net/http_fetch.hpp"

namespace kvrelay {

namespace {

namespace fs = std::filesystem;
using seconds_d = std::chrono::duration<double>;

std::string errno_text(int e) { return std::strerror(e); }

failure io_failure(const std::string& what, const std::string& path, int e) {
  return failure{ec::invalid_config, what + " " + path + ": " + errno_text(e), {}};
}

// Writes all of `bytes` to `fd` (retrying short writes and EINTR).
bool write_all(int fd, std::string_view bytes) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

// The whole file; ENOENT comes back as found = false.
outcome<std::string> read_whole(const std::string& path, bool& found) {
  found = false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return std::string();
    return io_failure("cannot open", path, errno);
  }
  found = true;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int e = errno;
    ::close(fd);
    return failure{ec::invalid_config, path + " is not a regular file" +
                                           (e ? std::string(": ") + errno_text(e) : ""), {}};
  }
  std::string out;
  out.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return io_failure("cannot read", path, e);
    }
    if (n == 0) break;  // shrank meanwhile: the decoder calls it truncated
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  ::close(fd);
  return out;
}

void remove_leftovers(const std::string& file) {
  std::error_code ec;
  const fs::path p(file);
  const std::string prefix = p.filename().string() + ".tmp";
  for (const auto& e : fs::directory_iterator(p.parent_path(), ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) fs::remove(e.path(), ec);
}

}  // namespace

evidence_reader metrics_evidence(std::string metrics_url, std::chrono::milliseconds timeout) {
  if (metrics_url.empty()) {
    return [](std::string& error) {
      error = "no metrics URL to read the engine's process_start_time_seconds from";
      return snapshot::evidence{};
    };
  }
  http_fetch_options o;
  o.timeout = timeout;
  // One kept-alive connection for the store's thread (the only caller).
  auto fetcher = std::make_shared<http_fetcher>(metrics_url, o);
  return [url = std::move(metrics_url), fetcher](std::string& error) {
    snapshot::evidence e;
    const auto r = fetcher->get();
    if (!r.ok) {
      error = r.error;
      return e;
    }
    if (r.status != 200) {
      error = "GET " + url + ": HTTP " + std::to_string(r.status);
      return e;
    }
    e.start_time = process_start_time(std::string_view(r.body));
    if (!e.start_time) error = "GET " + url + ": no process_start_time_seconds";
    return e;
  };
}

std::string snapshot_file(const std::string& dir, const std::string& pipeline,
                          const snapshot::identity& who) {
  std::string name;
  for (char c : pipeline)
    name += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')
                ? c
                : '_';
  if (name.empty() || name[0] == '.') name.insert(name.begin(), '_');
  const std::string key = who.replica_id + '\n' + who.model_id + '\n' + who.tenant_id + '\n' +
                          who.hash_scheme + '\n' + who.endpoint + '\n' + who.topic + '\n' +
                          std::to_string(who.dp_rank);
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x",
                static_cast<unsigned>(XXH3_64bits(key.data(), key.size()) & 0xffffffffu));
  std::string out = dir;
  if (!out.empty() && out.back() != '/') out += '/';
  return out + name + "-" + hex + ".kvsnap";
}

outcome<void> write_atomically(const std::string& path, const file_producer& produce,
                               size_t* written) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return io_failure("cannot create", tmp, errno);
  int error = 0;
  size_t total = 0;
  produce([&](std::string_view piece) {
    if (error != 0) return;
    if (!write_all(fd, piece)) error = errno;
    total += piece.size();
  });
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    ::unlink(tmp.c_str());
    return io_failure("cannot write", tmp, error);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return io_failure("cannot rename over", path, e);
  }
  // The rename is durable only once the directory is.
  const std::string dir = fs::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return io_failure("cannot open", dir, errno);
  const bool synced = ::fsync(dfd) == 0;
  const int e = errno;
  ::close(dfd);
  if (!synced) return io_failure("cannot fsync", dir, e);
  if (written) *written = total;
  return {};
}

outcome<void> write_atomically(const std::string& path, std::string_view bytes) {
  return write_atomically(path, [bytes](const std::function<void(std::string_view)>& sink) {
    sink(bytes);
  });
}

// -- state_store ---------------------------------------------------------------------------

state_store::state_store(state_options o) : opts_(std::move(o)) {
  thread_ = std::thread([this] { loop(); });
}

state_store::~state_store() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
    jobs_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void state_store::loop() {
  for (;;) {
    job j;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      j = std::move(jobs_.front());
      jobs_.pop_front();
    }
    j.run();
    // A cut's partition images (20 B per block) are freed with the job; hand the pages back
    // rather than keep a snapshot's worth of heap for the next one (glibc raises its mmap
    // threshold after such a free, so they would stay in the arena).
    j = job{};
    ::malloc_trim(0);
  }
}

void state_store::push(job j, bool supersedes) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    // The newest cut wins over a queued periodic one (the final one too: it must not wait).
    if ((j.replaceable || supersedes) && !jobs_.empty() && jobs_.back().replaceable)
      jobs_.back() = std::move(j);
    else
      jobs_.push_back(std::move(j));
  }
  cv_.notify_one();
}

void state_store::restore(uint64_t generation, std::function<void(restore_plan_ptr)> done) {
  push(job{[this, generation, done = std::move(done)] { done(do_restore(generation)); }, false},
       false);
}

void state_store::write(snapshot_ptr s, snapshot::evidence incarnation, bool establish,
                        bool final, std::function<void(write_report)> done) {
  push(job{[this, s = std::move(s), inc = std::move(incarnation), establish, final,
            done = std::move(done)] { done(do_write(s, inc, establish, final)); },
           !final && !establish},
       final);
}

restore_plan_ptr state_store::do_restore(uint64_t generation) {
  const auto t0 = std::chrono::steady_clock::now();
  auto plan = std::make_shared<restore_plan>();
  plan->generation = generation;
  remove_leftovers(opts_.file);
  bool found = false;
  auto bytes = read_whole(opts_.file, found);
  plan->found = found;
  std::optional<snapshot::pipeline_snapshot> snap;
  if (!bytes) {
    plan->discarded = snapshot::discard_reason::unreadable;
    plan->detail = bytes.error().context;
  } else if (found) {
    auto d = snapshot::decode(bytes.value());
    if (d.snapshot) {
      snap = std::move(d.snapshot);
    } else {
      plan->discarded = snapshot::from_fault(d.why);
      plan->detail = d.detail;
    }
  }
  bytes = std::string();  // the decoded copy is all that is kept
  // The incarnation's evidence, before the data path asks for its first batch (RD7), and the
  // proof (RD2-RD4).
  if (opts_.evidence) plan->engine = opts_.evidence(plan->evidence_error);
  else plan->evidence_error = "no evidence source";
  if (snap) {
    const auto v = snapshot::decide(*snap, opts_.who, plan->engine);
    if (v.use()) {
      plan->detail = std::to_string(snap->blocks()) + " blocks, next seq " +
                     std::to_string(snap->next_seq);
      plan->snapshot = std::make_shared<const snapshot::pipeline_snapshot>(std::move(*snap));
    } else {
      plan->discarded = v.discard;
      plan->detail = v.detail;
      if (*v.discard == snapshot::discard_reason::proof_missing && !plan->evidence_error.empty())
        plan->detail += " (" + plan->evidence_error + ")";
    }
  }
  plan->load_seconds = seconds_d(std::chrono::steady_clock::now() - t0).count();
  return plan;
}

write_report state_store::do_write(const snapshot_ptr& s, const snapshot::evidence& incarnation,
                                   bool establish, bool final) {
  const auto t0 = std::chrono::steady_clock::now();
  write_report r;
  r.final = final;
  if (!s) {
    r.detail = "nothing decoded yet";
    return r;
  }
  r.next_seq = s->next_seq;
  r.incarnation = s->incarnation;
  r.blocks = s->blocks();
  std::string error;
  if (opts_.evidence) r.engine = opts_.evidence(error);
  else error = "no evidence source";
  r.evidence_seconds = seconds_d(std::chrono::steady_clock::now() - t0).count();
  if (establish) {
    r.what = write_report::outcome::established;
    r.detail = r.engine.empty() ? "no evidence of the new engine incarnation: " + error
                                : "new engine incarnation: its evidence is read";
    return r;
  }
  if (!snapshot::may_write(incarnation, r.engine)) {  // RD7
    r.what = write_report::outcome::skipped;
    if (incarnation.empty())
      r.detail = "no evidence of the engine's process" + (error.empty() ? "" : ": " + error);
    else if (r.engine.empty())
      r.detail = "cannot read the engine's evidence now: " + error;
    else
      r.detail = "the engine is another process than the one these events came from";
    return r;
  }
  s->who = opts_.who;
  s->engine = incarnation;
  // Streamed: the file is never whole in memory (only the cut's partition images are).
  const auto w = write_atomically(
      opts_.file,
      [&s](const std::function<void(std::string_view)>& sink) { snapshot::encode(*s, sink); },
      &r.bytes);
  r.seconds = seconds_d(std::chrono::steady_clock::now() - t0).count();
  if (!w) {
    r.what = write_report::outcome::failed;
    r.detail = w.error().context;
    return r;
  }
  r.what = write_report::outcome::written;
  return r;
}

}  // namespace kvrelay
