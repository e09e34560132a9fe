// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "durable/format/snapshot_log.hpp"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack: no allocation per record
#include <xxhash.h>

#include <cstring>

namespace kvrelay::snapshot {

namespace {

constexpr char magic[8] = {'K', 'V', 'R', 'L', 'O', 'G', '\0', '\0'};

template <class T>
void put(std::string& out, T v) {
  using U = std::make_unsigned_t<T>;
  U u = static_cast<U>(v);
  for (size_t i = 0; i < sizeof(U); ++i, u = static_cast<U>(u >> 8))
    out.push_back(static_cast<char>(u & 0xff));
}

void put_f64(std::string& out, double v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  put(out, bits);
}

void put_evidence(std::string& out, const evidence& e) {
  put(out, static_cast<uint8_t>(e.start_time ? 1 : 0));
  put_f64(out, e.start_time.value_or(0.0));
  put(out, static_cast<uint32_t>(e.lifetime_id.size()));
  out.append(e.lifetime_id);
}

// LF3: every read checked against what is left.
class cursor {
 public:
  explicit cursor(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  size_t left() const { return in_.size() - pos_; }
  template <class T>
  T get() {
    using U = std::make_unsigned_t<T>;
    if (!take(sizeof(U))) return T{};
    U u = 0;
    for (size_t i = sizeof(U); i-- > 0;)
      u = static_cast<U>((u << 8) | static_cast<unsigned char>(in_[pos_ - sizeof(U) + i]));
    return static_cast<T>(u);
  }
  double f64() {
    const auto bits = get<uint64_t>();
    double v = 0;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  std::string_view bytes(size_t n) {
    if (!take(n)) return {};
    return in_.substr(pos_ - n, n);
  }
  evidence engine() {
    evidence e;
    const bool has = get<uint8_t>() != 0;
    const double t = f64();
    if (has) e.start_time = t;
    const auto n = get<uint32_t>();
    e.lifetime_id = std::string(bytes(n));
    return e;
  }

 private:
  bool take(size_t n) {
    if (!ok_ || n > left()) {
      ok_ = false;
      return false;
    }
    pos_ += n;
    return true;
  }
  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

bool known(uint8_t k) { return k >= 1 && k <= 7; }

void put_trailer(char (&out)[record_trailer_bytes], uint64_t sum) {
  for (size_t i = 0; i < record_trailer_bytes; ++i)
    out[i] = static_cast<char>((sum >> (8 * i)) & 0xff);
}

}  // namespace

const char* to_string(record_kind k) noexcept {
  switch (k) {
    case record_kind::begin: return "begin";
    case record_kind::batch: return "batch";
    case record_kind::first_batch: return "first_batch";
    case record_kind::history_lost: return "history_lost";
    case record_kind::reset: return "reset";
    case record_kind::asleep: return "asleep";
    case record_kind::evidence: return "evidence";
  }
  return "unknown";
}

bool changes_index(record_kind k) noexcept {
  return k == record_kind::batch || k == record_kind::first_batch ||
         k == record_kind::history_lost || k == record_kind::asleep || k == record_kind::reset;
}

const char* to_string(log_fault f) noexcept {
  switch (f) {
    case log_fault::none: return "none";
    case log_fault::not_a_log: return "not_a_log";
    case log_fault::other_pipeline: return "other_pipeline";
    case log_fault::torn: return "torn";
    case log_fault::corrupt: return "corrupt";
  }
  return "unknown";
}

uint64_t pipeline_key(const identity& who) noexcept {
  std::string key = who.replica_id + '\n' + who.model_id + '\n' + who.tenant_id + '\n' +
                    who.hash_scheme + '\n' + who.endpoint + '\n' + who.topic + '\n' +
                    std::to_string(who.dp_rank);
  return XXH3_64bits(key.data(), key.size());
}

std::string encode_header(const segment_header& h) {
  std::string out(magic, sizeof magic);
  put(out, log_format_version);
  put(out, uint32_t{0});
  put(out, h.pipeline_key);
  put(out, h.number);
  return out;
}

encoded_record encode(const log_record& r) {
  encoded_record e;
  switch (r.kind) {
    case record_kind::begin:
      put(e.body, static_cast<uint8_t>(r.cold ? 1 : 0));
      put_evidence(e.body, r.engine);
      break;
    case record_kind::evidence: put_evidence(e.body, r.engine); break;
    case record_kind::history_lost: put(e.body, r.first_available); break;
    case record_kind::reset: put(e.body, r.previous_seq); break;
    case record_kind::batch: e.payload = r.payload; break;
    case record_kind::first_batch:
    case record_kind::asleep: break;
  }
  const auto le = [&e](size_t at, uint64_t v, size_t bytes) {
    for (size_t i = 0; i < bytes; ++i, v >>= 8) e.head[at + i] = static_cast<char>(v & 0xff);
  };
  le(0, e.body.size() + e.payload.size(), 4);
  le(4, static_cast<uint8_t>(r.kind), 1);
  le(5, r.reason, 1);
  le(6, 0, 2);
  le(8, r.generation, 4);
  le(12, r.seq, 8);
  // One pass over head, body and payload (a batch is never copied to be checksummed).
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, e.head, record_head_bytes);
  if (!e.body.empty()) XXH3_64bits_update(&st, e.body.data(), e.body.size());
  if (!e.payload.empty()) XXH3_64bits_update(&st, e.payload.data(), e.payload.size());
  put_trailer(e.trailer, XXH3_64bits_digest(&st));
  return e;
}

std::string encode_bytes(const log_record& r) {
  const auto e = encode(r);
  std::string out(e.head, record_head_bytes);
  out += e.body;
  out.append(e.payload.data(), e.payload.size());
  out.append(e.trailer, record_trailer_bytes);
  return out;
}

segment_scan scan_segment(std::string_view bytes, uint64_t expected_key) {
  segment_scan s;
  if (bytes.size() < sizeof magic || std::memcmp(bytes.data(), magic, sizeof magic) != 0) {
    s.fault = bytes.size() < sizeof magic && std::string_view(magic, bytes.size()) == bytes
                  ? log_fault::torn
                  : log_fault::not_a_log;
    s.detail = s.fault == log_fault::torn ? "shorter than its header" : "no log magic";
    return s;
  }
  if (bytes.size() < log_header_bytes) {
    s.fault = log_fault::torn;
    s.detail = "shorter than its header";
    return s;
  }
  cursor h(bytes.substr(sizeof magic, log_header_bytes - sizeof magic));
  const auto version = h.get<uint32_t>();
  h.get<uint32_t>();
  s.header.pipeline_key = h.get<uint64_t>();
  s.header.number = h.get<uint64_t>();
  if (version != log_format_version) {
    s.fault = log_fault::not_a_log;
    s.detail = "log format version " + std::to_string(version);
    return s;
  }
  if (s.header.pipeline_key != expected_key) {
    s.fault = log_fault::other_pipeline;
    s.detail = "another pipeline's log";
    return s;
  }
  size_t at = log_header_bytes;
  s.valid_bytes = at;
  while (at < bytes.size()) {
    const std::string_view rest = bytes.substr(at);
    const auto fail = [&](log_fault f, std::string why) {
      s.fault = f;
      s.detail = "record at byte " + std::to_string(at) + ": " + why;
    };
    if (rest.size() < record_head_bytes) {
      fail(log_fault::torn, "head cut short");
      break;
    }
    cursor c(rest);
    const auto body_len = c.get<uint32_t>();
    const auto kind = c.get<uint8_t>();
    const auto reason = c.get<uint8_t>();
    c.get<uint16_t>();
    const auto generation = c.get<uint32_t>();
    const auto seq = c.get<uint64_t>();
    if (!known(kind) || body_len > max_body) {
      fail(log_fault::corrupt, !known(kind) ? "unknown kind " + std::to_string(kind)
                                            : "body length " + std::to_string(body_len));
      break;
    }
    if (c.left() < size_t{body_len} + record_trailer_bytes) {
      fail(log_fault::torn, "cut short (" + std::to_string(rest.size()) + " of " +
                                std::to_string(record_head_bytes + body_len +
                                               record_trailer_bytes) +
                                " bytes)");
      break;
    }
    const size_t whole = record_head_bytes + body_len;
    cursor t(rest.substr(whole, record_trailer_bytes));
    if (t.get<uint64_t>() != XXH3_64bits(rest.data(), whole)) {
      fail(log_fault::corrupt, "checksum mismatch");
      break;
    }
    log_record r;
    r.kind = static_cast<record_kind>(kind);
    r.reason = reason;
    r.generation = generation;
    r.seq = seq;
    cursor b(rest.substr(record_head_bytes, body_len));
    bool ok = true;
    switch (r.kind) {
      case record_kind::begin:
        r.cold = b.get<uint8_t>() != 0;
        r.engine = b.engine();
        ok = b.ok() && b.left() == 0;
        break;
      case record_kind::evidence:
        r.engine = b.engine();
        ok = b.ok() && b.left() == 0;
        break;
      case record_kind::history_lost:
        r.first_available = b.get<uint64_t>();
        ok = b.ok() && b.left() == 0 && r.first_available > r.seq;
        break;
      case record_kind::reset:
        r.previous_seq = b.get<uint64_t>();
        ok = b.ok() && b.left() == 0;
        break;
      case record_kind::batch: r.payload = rest.substr(record_head_bytes, body_len); break;
      case record_kind::first_batch:
      case record_kind::asleep: ok = body_len == 0; break;
    }
    if (!ok) {
      fail(log_fault::corrupt, std::string("body of a ") + to_string(r.kind) +
                                   " record does not parse (checksum matched)");
      break;
    }
    // LF5: positions never decrease; one that does was not written by kvrelay's writer.
    if (!s.records.empty() && r.position() < s.records.back().record.position()) {
      fail(log_fault::corrupt, "position goes backwards");
      break;
    }
    const size_t end = at + whole + record_trailer_bytes;
    s.records.push_back(segment_scan::entry{r, at, end});
    at = end;
    s.valid_bytes = at;
  }
  return s;
}

namespace {

bool opens_generation(const log_record& r) {
  return (r.kind == record_kind::begin && r.cold) || r.kind == record_kind::reset;
}

}  // namespace

log_decision decide_restore(const pipeline_snapshot* snap, const std::vector<log_entry>& log,
                            const evidence& now) {
  log_decision d;
  if (!snap && log.empty()) return d;  // nothing: the first start (generation 0, cold)
  // LR2: the last generation.
  uint32_t g = snap ? snap->generation : 0;
  for (const auto& e : log) g = std::max(g, e.record.generation);
  const auto cold_start = [&](std::optional<discard_reason> why, std::string detail) {
    d.use_snapshot = false;
    d.cold = true;
    d.generation = g + 1;
    d.resume_next.reset();
    d.history_from.reset();
    d.replay_from = d.replay_to = 0;
    d.replay_batches = 0;
    d.discard = why;
    d.detail = std::move(detail);
    return d;
  };
  // LR3: the base.
  size_t from = log.size();  // first entry after the base
  std::optional<uint64_t> next;
  std::optional<uint64_t> history;
  if (snap && snap->generation == g) {
    d.use_snapshot = true;
    next = snap->next_seq;
    history = snap->history_from;
    const log_position base{g, snap->next_seq};
    for (from = 0; from < log.size(); ++from)
      if (base <= log[from].record.position()) break;
  } else {
    d.snapshot_superseded = snap != nullptr;
    size_t first = log.size();
    for (size_t i = 0; i < log.size() && first == log.size(); ++i)
      if (log[i].record.generation == g) first = i;
    if (first == log.size() || !opens_generation(log[first].record))
      return cold_start(discard_reason::log_incomplete,
                        "the delta log does not hold the start of generation " +
                            std::to_string(g));
    from = first + 1;
  }
  // LR4: the generation's evidence.
  evidence proof = d.use_snapshot ? snap->engine : evidence{};
  for (const auto& e : log)
    if (e.record.generation == g &&
        (e.record.kind == record_kind::begin || e.record.kind == record_kind::evidence) &&
        !e.record.engine.empty())
      proof = e.record.engine;
  // LR5: the replay, up to the first hole.
  size_t to = from;
  for (; to < log.size(); ++to) {
    const log_record& r = log[to].record;
    if (r.generation != g) break;  // cannot happen (g is the last), kept for safety
    if (!changes_index(r.kind) || r.kind == record_kind::reset) continue;
    if (r.kind == record_kind::batch) {
      if (next && r.seq != *next) {
        d.hole = "batch " + std::to_string(r.seq) + " follows " + std::to_string(*next - 1);
        break;
      }
      next = r.seq + 1;
      ++d.replay_batches;
    } else if (r.kind == record_kind::history_lost) {
      if (next && r.seq != *next) {
        d.hole = "a loss from " + std::to_string(r.seq) + " where " + std::to_string(*next) +
                 " was next";
        break;
      }
      next = r.first_available;
      history.reset();
    } else if (r.kind == record_kind::first_batch) {
      if (!history) history = r.seq;
    } else if (r.kind == record_kind::asleep) {
      history = 0;
    }
  }
  // LR6: a cold opening with no batch since is the cold start (nothing to restore).
  if (!d.use_snapshot && !next) return cold_start(std::nullopt, "nothing to replay");
  switch (compare(proof, now)) {
    case sameness::same: break;
    case sameness::different:
      d.snapshot_discard = d.use_snapshot ? std::optional(discard_reason::engine_restarted)
                                          : std::nullopt;
      return cold_start(discard_reason::engine_restarted,
                        "generation " + std::to_string(g) + " was another engine process");
    case sameness::unknown:
      d.snapshot_discard = d.use_snapshot
                               ? std::optional(proof.empty() ? discard_reason::no_evidence
                                                             : discard_reason::proof_missing)
                               : std::nullopt;
      return cold_start(proof.empty() ? discard_reason::no_evidence
                                       : discard_reason::proof_missing,
                        proof.empty() ? "no evidence of the engine process was recorded"
                                      : "the engine's evidence cannot be read now");
  }
  d.replay_from = from;
  d.replay_to = to;
  d.resume_next = next;
  d.history_from = history;
  d.generation = g;
  d.cold = false;
  d.engine = proof;
  return d;
}

bool segment_covered(const log_position& next_first, const log_position& snap) noexcept {
  return next_first < snap;
}

}  // namespace kvrelay::snapshot
