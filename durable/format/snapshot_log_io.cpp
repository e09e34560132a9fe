// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "durable/format/snapshot_log_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace kvrelay::snapshot {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view suffix = ".kvlog";

// The whole file (a segment is a few MiB); false with `error` on failure.
bool read_all(const std::string& path, std::string& out, std::string& error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    error = "cannot stat " + path + ": " + std::strerror(errno);
    ::close(fd);
    return false;
  }
  out.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = "cannot read " + path + ": " + std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  ::close(fd);
  return true;
}

// The position of a segment's first record, read from its first bytes; unset when it has none
// that checks.
std::optional<log_position> first_position(const std::string& path, uint64_t key) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string head(log_header_bytes + record_head_bytes, '\0');
  const ssize_t n = ::pread(fd, head.data(), head.size(), 0);
  ::close(fd);
  if (n != static_cast<ssize_t>(head.size())) return std::nullopt;
  // The head alone is enough to order segments: scan_segment would want the whole record, so
  // read the fields directly (LF1, LF2 layout).
  if (scan_segment(head.substr(0, log_header_bytes), key).fault != log_fault::none)
    return std::nullopt;
  const auto le = [&](size_t at, size_t bytes) {
    uint64_t v = 0;
    for (size_t i = bytes; i-- > 0;)
      v = (v << 8) | static_cast<unsigned char>(head[log_header_bytes + at + i]);
    return v;
  };
  return log_position{static_cast<uint32_t>(le(8, 4)), le(12, 8)};
}

bool write_all(int fd, const struct iovec* iov, int count) {
  struct iovec v[4];
  if (count > 4) return false;
  std::copy(iov, iov + count, v);
  const size_t n_iov = static_cast<size_t>(count);
  size_t i = 0;
  while (i < n_iov) {
    if (v[i].iov_len == 0) {
      ++i;
      continue;
    }
    const ssize_t n = ::writev(fd, v + i, static_cast<int>(n_iov - i));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    size_t left = static_cast<size_t>(n);
    while (left > 0 && i < n_iov) {
      if (left >= v[i].iov_len) {
        left -= v[i].iov_len;
        ++i;
      } else {
        v[i].iov_base = static_cast<char*>(v[i].iov_base) + left;
        v[i].iov_len -= left;
        left = 0;
      }
    }
  }
  return true;
}

}  // namespace

std::string log_stem(const std::string& snapshot_file) {
  constexpr std::string_view ext = ".kvsnap";
  if (snapshot_file.size() > ext.size() &&
      snapshot_file.compare(snapshot_file.size() - ext.size(), ext.size(), ext) == 0)
    return snapshot_file.substr(0, snapshot_file.size() - ext.size());
  return snapshot_file;
}

std::string segment_path(const std::string& stem, uint64_t number) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(number));
  return stem + "." + hex + std::string(suffix);
}

std::vector<segment_file> list_segments(const std::string& stem) {
  std::vector<segment_file> out;
  const fs::path p(stem);
  const std::string prefix = p.filename().string() + ".";
  std::error_code ec;
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() != prefix.size() + 16 + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string hex = name.substr(prefix.size(), 16);
    if (hex.find_first_not_of("0123456789abcdef") != std::string::npos) continue;
    segment_file f;
    f.path = e.path().string();
    f.number = std::stoull(hex, nullptr, 16);
    std::error_code sec;
    f.bytes = fs::file_size(e.path(), sec);
    if (sec) continue;
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(),
            [](const segment_file& a, const segment_file& b) { return a.number < b.number; });
  return out;
}

// -- replay_reader ---------------------------------------------------------------------------

replay_reader::replay_reader(log_replay_ptr replay) : replay_(std::move(replay)) {}

bool replay_reader::load(size_t range, std::string& error) {
  const auto& r = replay_->ranges[range];
  auto bytes = std::make_shared<std::string>();
  if (!read_all(r.path, *bytes, error)) return false;
  auto scan = scan_segment(*bytes, replay_->pipeline_key);
  if (scan.valid_bytes < r.end) {
    error = r.path + ": changed since the restore step (" +
            (scan.fault == log_fault::none ? std::string("shorter") : scan.detail) + ")";
    return false;
  }
  entries_.clear();
  for (auto& e : scan.records)
    if (e.offset >= r.begin && e.end <= r.end) entries_.push_back(std::move(e));
  bytes_ = std::move(bytes);
  at_ = 0;
  loaded_ = true;
  return true;
}

std::optional<replay_reader::item> replay_reader::next(std::string& error) {
  if (!replay_) return std::nullopt;
  for (;;) {
    if (range_ >= replay_->ranges.size()) return std::nullopt;
    if (!loaded_ && !load(range_, error)) {
      range_ = replay_->ranges.size();
      return std::nullopt;
    }
    while (at_ < entries_.size()) {
      const auto& e = entries_[at_++];
      if (!changes_index(e.record.kind) || e.record.kind == record_kind::reset) continue;
      return item{e.record, bytes_};
    }
    loaded_ = false;
    entries_.clear();
    bytes_.reset();
    ++range_;
  }
}

// -- log_writer ------------------------------------------------------------------------------

log_writer::log_writer(writer_options o)
    : o_(std::move(o)), next_number_(o_.first_segment), generation_(o_.generation) {
  s_.generation = generation_;
  if (o_.segment_bytes < 4096) o_.segment_bytes = 4096;
}

log_writer::~log_writer() {
  if (fd_ >= 0) ::close(fd_);
}

void log_writer::stop(std::string why) {
  if (!s_.writing) return;
  s_.writing = false;
  s_.stopped = std::move(why);
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

bool log_writer::open_segment(const log_position& first) {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  segment seg;
  seg.number = next_number_++;
  seg.path = segment_path(o_.stem, seg.number);
  seg.first = first;
  const int fd = ::open(seg.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    stop("cannot create " + seg.path + ": " + std::strerror(errno));
    return false;
  }
  const std::string header = encode_header(segment_header{o_.pipeline_key, seg.number});
  struct iovec iov{const_cast<char*>(header.data()), header.size()};
  if (!write_all(fd, &iov, 1)) {
    const int e = errno;
    ::close(fd);
    stop("cannot write " + seg.path + ": " + std::strerror(e));
    return false;
  }
  fd_ = fd;
  seg.bytes = header.size();
  s_.disk_bytes += seg.bytes;
  s_.segments += 1;
  segments_.push_back(std::move(seg));
  return true;
}

void log_writer::append(const log_record& r) {
  if (closed_ || !s_.writing) return;
  const auto e = encode(r);
  const size_t n = e.size();
  if (s_.disk_bytes + n > o_.max_bytes) {
    stop("the log reached its bound of " + std::to_string(o_.max_bytes) +
         " bytes with no snapshot to compact it into");
    return;
  }
  // A new segment when this one is full (a record never spans two).
  const bool roll = fd_ < 0 || (segments_.back().bytes > log_header_bytes &&
                                segments_.back().bytes + n > o_.segment_bytes);
  if (roll && !open_segment(r.position())) return;
  struct iovec iov[4] = {{const_cast<char*>(e.head), record_head_bytes},
                         {const_cast<char*>(e.body.data()), e.body.size()},
                         {const_cast<char*>(e.payload.data()), e.payload.size()},
                         {const_cast<char*>(e.trailer), record_trailer_bytes}};
  if (!write_all(fd_, iov, 4)) {
    stop("cannot write " + segments_.back().path + ": " + std::strerror(errno));
    return;
  }
  segments_.back().bytes += n;
  s_.disk_bytes += n;
  s_.appended_bytes += n;
  s_.records += 1;
  if (r.kind == record_kind::batch) s_.batches += 1;
  s_.last = r.position();
  if (notify_ && s_.appended_bytes >= notify_at_) std::exchange(notify_, nullptr)();
}

void log_writer::begin(bool cold, uint64_t seq, const snapshot::evidence& e) {
  std::lock_guard<std::mutex> lk(mu_);
  log_record r;
  r.kind = record_kind::begin;
  r.cold = cold;
  r.engine = e;
  r.generation = generation_;
  r.seq = seq;
  next_seq_ = seq;
  append(r);
}

void log_writer::batch(uint64_t seq, std::string_view payload) {
  std::lock_guard<std::mutex> lk(mu_);
  log_record r;
  r.kind = record_kind::batch;
  r.generation = generation_;
  r.seq = seq;
  r.payload = payload;
  next_seq_ = seq + 1;
  append(r);
}

void log_writer::first_batch(uint64_t seq) {
  std::lock_guard<std::mutex> lk(mu_);
  log_record r;
  r.kind = record_kind::first_batch;
  r.generation = generation_;
  r.seq = seq;
  append(r);
}

void log_writer::history_lost(uint64_t first_missing, uint64_t first_available,
                              uint8_t reason) {
  std::lock_guard<std::mutex> lk(mu_);
  log_record r;
  r.kind = record_kind::history_lost;
  r.generation = generation_;
  r.seq = first_missing;
  r.first_available = first_available;
  r.reason = reason;
  next_seq_ = first_available;
  append(r);
}

void log_writer::reset(uint64_t previous_seq, uint64_t) {
  std::lock_guard<std::mutex> lk(mu_);
  ++generation_;
  s_.generation = generation_;
  next_seq_ = 0;
  log_record r;
  r.kind = record_kind::reset;
  r.generation = generation_;
  r.seq = 0;
  r.previous_seq = previous_seq;
  append(r);
}

void log_writer::asleep() {
  std::lock_guard<std::mutex> lk(mu_);
  log_record r;
  r.kind = record_kind::asleep;
  r.generation = generation_;
  r.seq = next_seq_;
  append(r);
}

void log_writer::evidence(const snapshot::evidence& e) {
  std::lock_guard<std::mutex> lk(mu_);
  log_record r;
  r.kind = record_kind::evidence;
  r.generation = generation_;
  r.seq = next_seq_;
  r.engine = e;
  append(r);
}

void log_writer::close() {
  std::lock_guard<std::mutex> lk(mu_);
  closed_ = true;
  s_.writing = false;
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  notify_ = nullptr;
}

uint64_t log_writer::release(const log_position& snap) {
  std::optional<uint64_t> open;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (fd_ >= 0 && !segments_.empty()) open = segments_.back().number;
  }
  const auto files = list_segments(o_.stem);
  uint64_t removed = 0;
  std::vector<uint64_t> gone;
  for (size_t i = 0; i + 1 < files.size(); ++i) {
    if (open && files[i].number >= *open) break;
    const auto next = first_position(files[i + 1].path, o_.pipeline_key);
    if (!next || !segment_covered(*next, snap)) break;  // positions only grow: stop at the first
    std::error_code ec;
    if (fs::remove(files[i].path, ec)) {
      removed += files[i].bytes;
      gone.push_back(files[i].number);
    }
  }
  std::lock_guard<std::mutex> lk(mu_);
  for (uint64_t n : gone) {
    auto it = std::find_if(segments_.begin(), segments_.end(),
                           [n](const segment& s) { return s.number == n; });
    if (it == segments_.end()) continue;
    s_.disk_bytes -= std::min(s_.disk_bytes, it->bytes);
    s_.segments -= 1;
    segments_.erase(it);
  }
  return removed;
}

void log_writer::notify_at(uint64_t at, std::function<void()> f) {
  std::lock_guard<std::mutex> lk(mu_);
  if (closed_) return;
  notify_at_ = at;
  notify_ = std::move(f);
}

log_writer::stats log_writer::read() const {
  std::lock_guard<std::mutex> lk(mu_);
  return s_;
}

}  // namespace kvrelay::snapshot
