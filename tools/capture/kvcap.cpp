// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "tools/capture/kvcap.hpp"

#include <cerrno>
#include <cstring>

#include "base/big_endian.hpp"

namespace kvrelay::capture {

namespace {

constexpr uint64_t end_seq = ~uint64_t{0};
// kind (1) + receive time (8) + frame count (2).
constexpr uint32_t record_fixed = 11;

failure bad(std::string what) { return failure{ec::invalid_config, std::move(what), {}}; }

void put_be(std::string& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t get_be(const unsigned char* p, int bytes) { return load_be(p, bytes); }

uint64_t seq_of(std::string_view frame) {
  return get_be(reinterpret_cast<const unsigned char*>(frame.data()), 8);
}

}  // namespace

int64_t live_seq(const record& r) {
  if (r.kind != record_kind::live || r.frames.size() != 3 || r.frames[1].size() != 8) return -1;
  const uint64_t s = seq_of(r.frames[1]);
  return s == end_seq || s > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(s);
}

bool reply_batch(const record& r, uint64_t& seq, std::string_view& payload) {
  if (r.kind != record_kind::replay_reply) return false;
  const size_t n = r.frames.size();
  if (n != 2 && n != 3) return false;
  const auto& s = r.frames[n - 2];
  if (s.size() != 8 || seq_of(s) == end_seq) return false;
  seq = seq_of(s);
  payload = r.frames[n - 1];
  return true;
}

// ---- writer ------------------------------------------------------------------------------------

outcome<std::unique_ptr<writer>> writer::create(const std::string& path,
                                                const std::string& meta_json) {
  if (meta_json.size() > max_meta_bytes) return bad("capture header over 64 KiB");
  std::unique_ptr<writer> w(new writer());
  w->path_ = path;
  w->f_ = std::fopen(path.c_str(), "wb");
  if (!w->f_) return bad("cannot create " + path + ": " + std::strerror(errno));
  std::string head(magic);
  put_be(head, format_version, 2);
  put_be(head, 0, 2);  // flags: none defined in version 1
  put_be(head, meta_json.size(), 4);
  head += meta_json;
  if (std::fwrite(head.data(), 1, head.size(), w->f_) != head.size())
    return bad("cannot write " + path + ": " + std::strerror(errno));
  w->bytes_ = head.size();
  return w;
}

writer::~writer() { close(); }

uint64_t writer::record_bytes(const std::vector<std::string_view>& frames) {
  uint64_t n = 4 + record_fixed;
  for (const auto& f : frames) n += 4 + f.size();
  return n;
}

outcome<void> writer::write(record_kind kind, int64_t recv_unix_ns,
                            const std::vector<std::string_view>& frames) {
  if (!f_) return bad(path_ + " is closed");
  if (frames.size() > max_frames)
    return bad("a message of " + std::to_string(frames.size()) + " frames (at most 16)");
  for (const auto& fr : frames)
    if (fr.size() > max_frame_bytes)
      return bad("a frame of " + std::to_string(fr.size()) + " bytes (at most 64 MiB)");
  const uint64_t total = record_bytes(frames);
  std::string head;
  put_be(head, total - 4, 4);
  head += static_cast<char>(kind);
  put_be(head, static_cast<uint64_t>(recv_unix_ns), 8);
  put_be(head, frames.size(), 2);
  bool ok = std::fwrite(head.data(), 1, head.size(), f_) == head.size();
  for (const auto& fr : frames) {
    std::string len;
    put_be(len, fr.size(), 4);
    ok = ok && std::fwrite(len.data(), 1, 4, f_) == 4 &&
         std::fwrite(fr.data(), 1, fr.size(), f_) == fr.size();
  }
  if (!ok) return bad("cannot write " + path_ + ": " + std::strerror(errno));
  bytes_ += total;
  return {};
}

outcome<void> writer::flush() {
  if (f_ && std::fflush(f_) != 0) return bad("cannot write " + path_ + ": " + std::strerror(errno));
  return {};
}

outcome<void> writer::close() {
  if (!f_) return {};
  const bool ok = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!ok) return bad("cannot write " + path_ + ": " + std::strerror(errno));
  return {};
}

// ---- reader ------------------------------------------------------------------------------------

outcome<std::unique_ptr<reader>> reader::open(const std::string& path) {
  std::unique_ptr<reader> r(new reader());
  r->path_ = path;
  r->f_ = std::fopen(path.c_str(), "rb");
  if (!r->f_) return bad("cannot open " + path + ": " + std::strerror(errno));
  unsigned char head[16];
  const size_t got = std::fread(head, 1, sizeof head, r->f_);
  if (got < magic.size() || std::memcmp(head, magic.data(), magic.size()) != 0)
    return bad(path + " is not a kvrelay capture (no KVCAP header)");
  if (got < sizeof head) return bad(path + ": header cut short");
  r->version_ = static_cast<uint16_t>(get_be(head + 8, 2));
  if (r->version_ != format_version)
    return bad(path + " is a version " + std::to_string(r->version_) +
               " capture; this build reads version " + std::to_string(format_version));
  const uint64_t meta_len = get_be(head + 12, 4);
  if (meta_len > max_meta_bytes) return bad(path + ": header description over 64 KiB");
  r->meta_.resize(meta_len);
  if (std::fread(r->meta_.data(), 1, meta_len, r->f_) != meta_len)
    return bad(path + ": header cut short");
  r->offset_ = sizeof head + meta_len;
  return r;
}

reader::~reader() {
  if (f_) std::fclose(f_);
}

outcome<bool> reader::next(record& out) {
  truncated_ = false;
  const uint64_t at = offset_;
  const auto where = [&] { return path_ + ": record at offset " + std::to_string(at); };
  const auto cut = [&] {
    truncated_ = true;
    return bad(where() + " is cut short (the capture ended mid-write)");
  };
  unsigned char len4[4];
  const size_t got = std::fread(len4, 1, 4, f_);
  if (got == 0 && std::feof(f_)) return false;
  if (got < 4) return cut();
  const uint64_t length = get_be(len4, 4);
  uint64_t left = length;
  if (left < record_fixed) return bad(where() + " is shorter than its fixed part");
  unsigned char fixed[record_fixed];
  if (std::fread(fixed, 1, record_fixed, f_) != record_fixed) return cut();
  left -= record_fixed;
  const uint8_t kind = fixed[0];
  if (kind != static_cast<uint8_t>(record_kind::live) &&
      kind != static_cast<uint8_t>(record_kind::replay_reply))
    return bad(where() + " has unknown kind " + std::to_string(kind));
  const uint64_t nframes = get_be(fixed + 9, 2);
  if (nframes > max_frames) return bad(where() + " has " + std::to_string(nframes) + " frames");
  out.kind = static_cast<record_kind>(kind);
  out.recv_unix_ns = static_cast<int64_t>(get_be(fixed + 1, 8));
  out.frames.resize(nframes);
  for (auto& fr : out.frames) {
    if (left < 4) return bad(where() + ": frames overrun the record");
    if (std::fread(len4, 1, 4, f_) != 4) return cut();
    left -= 4;
    const uint64_t n = get_be(len4, 4);
    if (n > max_frame_bytes || n > left) return bad(where() + ": a frame overruns the record");
    fr.resize(n);
    if (std::fread(fr.data(), 1, n, f_) != n) return cut();
    left -= n;
  }
  if (left != 0) return bad(where() + ": " + std::to_string(left) + " bytes after its frames");
  offset_ = at + 4 + length;
  return true;
}

outcome<capture_contents> read_all(const std::string& path, bool tolerate_truncated_tail) {
  auto r = reader::open(path);
  if (!r) return r.error();
  capture_contents out;
  out.meta_json = r.value()->meta_json();
  for (;;) {
    record rec;
    auto more = r.value()->next(rec);
    if (!more) {
      if (tolerate_truncated_tail && r.value()->truncated()) {
        out.truncated = true;
        return out;
      }
      return more.error();
    }
    if (!more.value()) return out;
    out.records.push_back(std::move(rec));
  }
}

}  // namespace kvrelay::capture
