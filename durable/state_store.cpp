// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "durable/state_store.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "actors/scraper/metric_profile.hpp"
#include "durable/format/snapshot_log.hpp"
#include "durable/format/snapshot_log_io.hpp"
#include "durable/format/state_dir.hpp"
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

// "<name>-<8 hex>" of a snapshot file: the pipeline's name, and its identity's hash.
bool split_stem(const std::string& file_name, std::string& name, std::string& hash) {
  constexpr std::string_view ext = ".kvsnap";
  if (file_name.size() < ext.size() + 10 ||
      file_name.compare(file_name.size() - ext.size(), ext.size(), ext) != 0)
    return false;
  const std::string stem = file_name.substr(0, file_name.size() - ext.size());
  if (stem[stem.size() - 9] != '-') return false;
  hash = stem.substr(stem.size() - 8);
  if (hash.find_first_not_of("0123456789abcdef") != std::string::npos) return false;
  name = stem.substr(0, stem.size() - 9);
  return true;
}

// Whether `file_name` is one of `name`'s state files with another identity hash than `own`.
bool other_endpoint(const std::string& file_name, const std::string& name,
                    const std::string& own) {
  const std::string lead = name + "-";
  if (file_name.size() < lead.size() + 8 || file_name.rfind(lead, 0) != 0) return false;
  const std::string hash = file_name.substr(lead.size(), 8);
  if (hash == own || hash.find_first_not_of("0123456789abcdef") != std::string::npos)
    return false;
  const std::string rest = file_name.substr(lead.size() + 8);
  if (rest == ".kvsnap" || rest.rfind(".kvsnap.tmp.", 0) == 0) return true;
  // ".<16 hex>.kvlog"
  return rest.size() == 1 + 16 + 6 && rest[0] == '.' &&
         rest.compare(17, 6, ".kvlog") == 0 &&
         rest.substr(1, 16).find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

uint64_t pipeline_state_bytes(const std::string& snapshot_file) {
  std::error_code ec;
  const fs::path p(snapshot_file);
  const std::string own = p.filename().string();
  const std::string stem = snapshot::log_stem(own) + ".";
  uint64_t total = 0;
  for (const auto& e : fs::directory_iterator(p.parent_path(), ec)) {
    const std::string n = e.path().filename().string();
    if (n != own && n.rfind(own + ".tmp", 0) != 0 &&
        !(n.rfind(stem, 0) == 0 && n.size() > 6 && n.compare(n.size() - 6, 6, ".kvlog") == 0))
      continue;
    std::error_code sec;
    const auto b = e.file_size(sec);
    if (!sec) total += b;
  }
  return total;
}

uint64_t remove_other_endpoints(const std::string& own_file) {
  std::error_code ec;
  const fs::path p(own_file);
  std::string name, own;
  if (!split_stem(p.filename().string(), name, own)) return 0;
  uint64_t removed = 0;
  for (const auto& e : fs::directory_iterator(p.parent_path(), ec)) {
    if (!other_endpoint(e.path().filename().string(), name, own)) continue;
    std::error_code sec;
    const auto b = e.file_size(sec);
    if (fs::remove(e.path(), sec)) removed += sec ? 0 : b;
  }
  return removed;
}

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

namespace {

// A job's heap (a cut's partition images, 20 B per block; a restore's file) is freed by the time
// this runs: hand the pages back rather than keep a snapshot's worth of heap for the next one
// (glibc raises its mmap threshold after such a free, so they would stay in the arena).
void trim_heap() { ::malloc_trim(0); }

}  // namespace

state_store::state_store(state_options o)
    : opts_(std::move(o)),
      // Named for top -H and the benchmarks' per-thread CPU. Joined at close (WB4): the
      // shutdown's last write is waited for by the drain, and a write is bounded by the disk.
      worker_(worker_options{"kvr.state", worker_options::threads::serial,
                             worker_options::on_close::join, false},
              [](std::function<void()> completion) { completion(); }) {}

state_store::~state_store() = default;

void state_store::restore(uint64_t generation, std::function<void(restore_plan_ptr)> done) {
  worker_.submit([this, generation, done = std::move(done)]() -> std::function<void()> {
    auto plan = do_restore(generation);
    trim_heap();
    return [done, plan = std::move(plan)] { done(plan); };
  });
}

void state_store::write(snapshot_ptr s, snapshot::evidence incarnation, write_mode mode,
                        bool final, std::shared_ptr<snapshot::log_writer> log,
                        std::function<void(write_report)> done) {
  // WB6: the newest cut wins over a queued periodic one (the final one too: it must not wait).
  const auto how = final ? queueing::replacing
                         : mode == write_mode::write ? queueing::replaceable : queueing::append;
  worker_.submit(
      [this, s = std::move(s), inc = std::move(incarnation), mode, final, log = std::move(log),
       done = std::move(done)]() mutable -> std::function<void()> {
        auto report = do_write(s, inc, mode, final, log);
        s.reset();  // the cut's images, before the trim
        trim_heap();
        return [done, report = std::move(report)]() mutable { done(std::move(report)); };
      },
      how);
}

void state_store::establish(uint64_t incarnation, std::shared_ptr<snapshot::log_writer> log,
                            std::function<void(write_report)> done) {
  worker_.submit([this, incarnation, log = std::move(log),
                  done = std::move(done)]() -> std::function<void()> {
    write_report r;
    r.what = write_report::outcome::established;
    r.cut = false;
    r.incarnation = incarnation;
    const auto t0 = std::chrono::steady_clock::now();
    std::string error;
    if (opts_.evidence) r.engine = opts_.evidence(error);
    else error = "no evidence source";
    r.evidence_seconds = seconds_d(std::chrono::steady_clock::now() - t0).count();
    // LR4: the log's new generation is proved by this record.
    if (log && !r.engine.empty()) log->evidence(r.engine);
    r.detail = r.engine.empty() ? "no evidence of the new engine incarnation: " + error
                                : "new engine incarnation: its evidence is read";
    return [done, r = std::move(r)]() mutable { done(std::move(r)); };
  });
}

restore_plan_ptr state_store::do_restore(uint64_t generation) {
  const auto t0 = std::chrono::steady_clock::now();
  auto plan = std::make_shared<restore_plan>();
  plan->generation = generation;
  remove_leftovers(opts_.file);
  bool found = false;
  auto bytes = read_whole(opts_.file, found);
  std::optional<snapshot::pipeline_snapshot> snap;
  std::optional<snapshot::discard_reason> snap_discard;
  std::string snap_detail;
  if (!bytes) {
    snap_discard = snapshot::discard_reason::unreadable;
    snap_detail = bytes.error().context;
  } else if (found) {
    plan->snapshot_bytes = bytes.value().size();
    auto d = snapshot::decode(bytes.value());
    if (!d.snapshot) {
      snap_discard = snapshot::from_fault(d.why);
      snap_detail = d.detail;
    } else if (d.snapshot->who != opts_.who) {  // RD1
      snap_discard = snapshot::discard_reason::other_pipeline;
      snap_detail = snapshot::decide(*d.snapshot, opts_.who, {}).detail;
    } else {
      snap = std::move(d.snapshot);
    }
  }
  bytes = std::string();  // the decoded copy is all that is kept

  // LR1: the log's valid prefix, segment by segment (one in memory at a time).
  const std::string stem = snapshot::log_stem(opts_.file);
  const uint64_t key = snapshot::pipeline_key(opts_.who);
  const auto segments = opts_.log ? snapshot::list_segments(stem)
                                  : std::vector<snapshot::segment_file>{};
  std::vector<snapshot::log_entry> entries;
  std::vector<std::string> paths;
  for (size_t i = 0; i < segments.size(); ++i) {
    const auto& f = segments[i];
    plan->next_segment = std::max(plan->next_segment, f.number + 1);
    bool seg_found = false;
    auto seg = read_whole(f.path, seg_found);
    snapshot::segment_scan scan;
    if (!seg) {
      scan.fault = snapshot::log_fault::corrupt;
      scan.detail = seg.error().context;
    } else {
      scan = snapshot::scan_segment(seg.value(), key);
    }
    for (auto& e : scan.records)
      entries.push_back(snapshot::log_entry{[&] {
                                              auto r = e.record;
                                              r.payload = {};
                                              return r;
                                            }(),
                                            paths.size(), e.offset, e.end});
    paths.push_back(f.path);
    if (scan.fault == snapshot::log_fault::none) continue;
    // The rest of this segment and every later one are dropped (said once, with the sizes).
    uint64_t dropped = f.bytes - std::min<uint64_t>(f.bytes, scan.valid_bytes);
    std::error_code ec;
    if (scan.valid_bytes >= snapshot::log_header_bytes && scan.fault != snapshot::log_fault::not_a_log &&
        scan.fault != snapshot::log_fault::other_pipeline)
      fs::resize_file(f.path, scan.valid_bytes, ec);
    else
      fs::remove(f.path, ec);
    size_t later = 0;
    for (size_t j = i + 1; j < segments.size(); ++j, ++later) {
      dropped += segments[j].bytes;
      plan->next_segment = std::max(plan->next_segment, segments[j].number + 1);
      fs::remove(segments[j].path, ec);
    }
    plan->log_detail = f.path + ": " + snapshot::to_string(scan.fault) + ": " + scan.detail +
                       "; " + std::to_string(dropped) + " bytes dropped (" +
                       std::to_string(later) + " later segment" + (later == 1 ? "" : "s") +
                       "), " + std::to_string(entries.size()) + " records kept";
    break;
  }

  // The incarnation's evidence, before the data path asks for its first batch (RD7), and the
  // proof (LR4).
  if (opts_.evidence) plan->engine = opts_.evidence(plan->evidence_error);
  else plan->evidence_error = "no evidence source";
  const auto d = snapshot::decide_restore(snap ? &*snap : nullptr, entries, plan->engine);
  plan->found = found || !segments.empty();
  plan->log_generation = d.generation;
  plan->cold = d.cold;
  if (!d.cold) {
    if (d.use_snapshot)
      plan->snapshot = std::make_shared<const snapshot::pipeline_snapshot>(std::move(*snap));
    plan->resume_next = d.resume_next;
    plan->history_known = d.history_from.has_value();
    plan->history_from = d.history_from.value_or(d.resume_next.value_or(0));
    if (d.replay_to > d.replay_from) {
      auto replay = std::make_shared<snapshot::log_replay>();
      replay->pipeline_key = key;
      for (size_t i = d.replay_from; i < d.replay_to; ++i) {
        const auto& e = entries[i];
        if (replay->ranges.empty() || replay->ranges.back().path != paths[e.segment])
          replay->ranges.push_back(snapshot::replay_range{paths[e.segment], e.offset, e.end});
        else
          replay->ranges.back().end = e.end;
        ++replay->records;
        replay->bytes += e.end - e.offset;
      }
      replay->batches = d.replay_batches;
      plan->log = std::move(replay);
    }
    plan->detail = (plan->snapshot ? std::to_string(plan->snapshot->blocks()) +
                                         " blocks at seq " +
                                         std::to_string(plan->snapshot->next_seq)
                                   : std::string("no snapshot")) +
                   ", " + std::to_string(d.replay_batches) + " logged batches, the ring from " +
                   std::to_string(d.resume_next.value_or(0)) +
                   (d.hole.empty() ? "" : " (the log has a hole: " + d.hole + ")");
    if (snap_discard && !plan->snapshot) {
      plan->discarded = snap_discard;  // said, though the log alone restores
      plan->detail += "; the snapshot was not used: " + snap_detail;
    }
  } else {
    // LR7: nothing here describes what the cold start will build; it starts a history of its
    // own, so the older files go now (the directory stays bounded).
    plan->discarded = snap_discard ? snap_discard : d.discard;
    if (snap && d.snapshot_discard) plan->discarded = d.snapshot_discard;
    plan->detail = snap_discard ? snap_detail : d.detail;
    if (plan->discarded == snapshot::discard_reason::proof_missing &&
        !plan->evidence_error.empty())
      plan->detail += " (" + plan->evidence_error + ")";
    std::error_code ec;
    for (const auto& f : snapshot::list_segments(stem)) fs::remove(f.path, ec);
    if (found) fs::remove(opts_.file, ec);
  }
  plan->state_bytes = pipeline_state_bytes(opts_.file);
  plan->load_seconds = seconds_d(std::chrono::steady_clock::now() - t0).count();
  return plan;
}

write_report state_store::do_write(const snapshot_ptr& s, const snapshot::evidence& incarnation,
                                   write_mode mode, bool final,
                                   const std::shared_ptr<snapshot::log_writer>& log) {
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
  if (mode == write_mode::establish) {
    r.what = write_report::outcome::established;
    if (log && !r.engine.empty()) log->evidence(r.engine);  // LR4
    r.detail = r.engine.empty() ? "no evidence of the new engine incarnation: " + error
                                : "new engine incarnation: its evidence is read";
    return r;
  }
  // The shutdown's last cut of an incarnation whose evidence was not read yet: what is read now
  // is its proof (the engine restarted moments ago and has not had time to restart again).
  const snapshot::evidence& proof =
      mode == write_mode::establish_and_write ? r.engine : incarnation;
  if (!snapshot::may_write(proof, r.engine)) {  // RD7
    r.what = write_report::outcome::skipped;
    if (proof.empty())
      r.detail = "no evidence of the engine's process" + (error.empty() ? "" : ": " + error);
    else if (r.engine.empty())
      r.detail = "cannot read the engine's evidence now: " + error;
    else
      r.detail = "the engine is another process than the one these events came from";
    return r;
  }
  if (mode == write_mode::establish_and_write && log) log->evidence(r.engine);  // LR4
  s->who = opts_.who;
  s->engine = proof;
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
  if (mode == write_mode::establish_and_write) r.detail = "with the evidence read now";
  // LR8, then the files of this pipeline's earlier endpoints (one snapshot per
  // pipeline served).
  if (log) r.log_released = log->release(snapshot::log_position{s->generation, s->next_seq});
  r.stale_removed = remove_other_endpoints(opts_.file);
  r.state_bytes = pipeline_state_bytes(opts_.file);
  r.dir_bytes = state_dir_usage(fs::path(opts_.file).parent_path().string()).bytes;
  return r;
}

}  // namespace kvrelay
