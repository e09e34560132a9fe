// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/decoder/batch_router.hpp"

#include <algorithm>
#include <utility>

#include "base/clock.hpp"

namespace kvrelay {

namespace {

// An unknown medium becomes a metric label and a log field: printable, short.
std::string sanitize(const std::string& text) {
  std::string out;
  for (char c : text.substr(0, 32)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.' || c == ':';
    out.push_back(ok ? c : '_');
  }
  return out.empty() ? std::string("(empty)") : out;
}

}  // namespace

batch_router::batch_router(router_options opts)
    : opts_(std::move(opts)), decoder_(opts_.limits) {}

void batch_router::reset(router_output& out) const {
  out.steps.clear();
  out.error = decode_error::none;
  out.detail.clear();
  out.wrong_rank = false;
  out.first_batch = false;
  out.new_partitions.clear();
  out.unmapped_ids.clear();
  out.unknown_media.clear();
  out.partition_limit_hit = false;
  out.malformed.clear();
  out.removal_lost = false;
}

shard_work& batch_router::work(double ts) {
  if (!current_) {
    current_ = std::make_shared<shard_work>();
    current_->epoch = epoch_;
    current_->ts = ts;
    current_->replayed = replayed_;
    current_->first_new = static_cast<uint32_t>(partition_ids_.size());
  }
  return *current_;
}

void batch_router::flush(router_output& out) {
  if (!current_) return;
  router_step s;
  s.what = router_step::kind::work;
  s.work = std::move(current_);
  out.steps.push_back(std::move(s));
  current_.reset();
}

void batch_router::clear(router_output& out, int64_t ts_us, const char* reason) {
  flush(out);
  ++epoch_;
  router_step s;
  s.what = router_step::kind::clear;
  s.epoch = epoch_;
  s.ts_us = ts_us;
  s.reason = reason;
  out.steps.push_back(std::move(s));
}

bool batch_router::resolve(const block_stored& ev, router_output& out, uint32_t& partition) {
  const std::string* name = nullptr;
  static const std::string base;
  if (ev.lora_name && !ev.lora_name->empty()) {
    name = &*ev.lora_name;
  } else if (!ev.lora_id) {
    name = &base;
  } else if (auto it = opts_.adapters.find(*ev.lora_id);
             it != opts_.adapters.end() && !it->second.empty()) {
    name = &it->second;
  } else {
    ++stats_.unmapped;
    if (warned_ids_.size() < max_warned_ids && warned_ids_.insert(*ev.lora_id).second)
      out.unmapped_ids.push_back(*ev.lora_id);
    return false;
  }
  if (auto it = partition_ids_.find(*name); it != partition_ids_.end()) {
    partition = it->second;
    return true;
  }
  if (partition_ids_.size() >= opts_.max_partitions) {
    ++stats_.partition_limited;
    if (!warned_limit_) out.partition_limit_hit = warned_limit_ = true;
    return false;
  }
  shard_work& w = work(batch_.ts);
  partition = static_cast<uint32_t>(partition_ids_.size());
  partition_ids_.emplace(*name, partition);
  w.new_partitions.push_back(*name);
  out.new_partitions.push_back(*name);
  return true;
}

bool batch_router::admit_medium(const medium_info& m, router_output& out) {
  if (m.known()) return true;
  ++stats_.unknown_medium;
  auto& values = stats_.unknown_media;
  std::string key = sanitize(m.text);
  if (values.find(key) == values.end() && values.size() >= max_media_values) key = "other";
  auto [it, first] = values.try_emplace(key, 0);
  ++it->second;
  if (first) out.unknown_media.push_back(key);
  return false;
}

void batch_router::on_batch(const char* data, size_t size, router_output& out, bool replayed) {
  reset(out);
  replayed_ = replayed;
  ++stats_.batches;
  const decode_error err = decoder_.decode(data, size, batch_, &out.detail);
  if (err != decode_error::none) {
    ++stats_.dropped;
    out.error = err;
    last_error_ = out.detail;
    return;
  }
  out.detail.clear();
  if (opts_.expected_dp_rank && batch_.dp_rank && *batch_.dp_rank != *opts_.expected_dp_rank) {
    ++stats_.dropped;
    ++stats_.wrong_rank;
    out.wrong_rank = true;
    return;
  }
  ++stats_.decoded;
  stats_.unknown_tags += batch_.skipped_unknown;
  stats_.events += batch_.events.size();
  if (!told_first_) out.first_batch = told_first_ = true;

  uint32_t partition = 0;
  // BR3, BR5, BR6 for either kind of event; false when it goes no further.
  const auto admit = [&](size_t type, const auto& e) {
    const auto m = static_cast<size_t>(e.medium.id);
    ++stats_.events_by_medium[type][m];
    stats_.blocks_by_medium[type][m] += e.block_hashes.size();
    if (!groups_.admit(e)) {
      ++stats_.group_filtered;
      return false;
    }
    return admit_medium(e.medium, out);
  };
  size_t after_clear = 0;  // decoded events before the first one after the batch's last clear
  for (size_t k = 0; k < batch_.events.size(); ++k) {
    kv_event& ev = batch_.events[k];
    switch (ev.type) {
      case event_type::stored:
        if (!admit(router_stats::stored, ev.stored) || !resolve(ev.stored, out, partition)) break;
        work(batch_.ts).events.push_back(std::move(ev));
        current_->partitions.push_back(partition);
        break;
      case event_type::removed:
        if (!admit(router_stats::removed, ev.removed)) break;
        work(batch_.ts).events.push_back(std::move(ev));
        current_->partitions.push_back(0);
        break;
      case event_type::cleared:
        ++stats_.cleared;
        clear(out, engine_ts_to_us(batch_.ts), "AllBlocksCleared");
        after_clear = k + 1;
        break;
    }
  }
  flush(out);
  note_faults(after_clear, out);
}

void batch_router::note_faults(size_t after_clear, router_output& out) {
  const auto& faults = decoder_.faults();
  if (faults.empty()) return;
  out.malformed.assign(faults.begin(), faults.end());
  bool lost = false;
  for (const event_fault& f : faults) {
    ++stats_.malformed[static_cast<size_t>(f.kind)][static_cast<size_t>(f.reason)];
    ++stats_.malformed_total;
    if (f.kind != event_kind::removed && f.kind != event_kind::cleared) continue;
    ++stats_.removals_lost;
    // One before a clear of the same batch was made good by that clear.
    lost = lost || f.decoded_before >= after_clear;
  }
  // Said once per epoch: a clear (the engine's, or ours after a loss) makes the index match.
  if (lost && lost_epoch_ != epoch_) {
    out.removal_lost = true;
    lost_epoch_ = epoch_;
  }
}

void batch_router::on_history_lost(router_output& out) {
  reset(out);
  clear(out, 0, "history lost");
}

void batch_router::on_incarnation_reset(router_output& out) {
  reset(out);
  groups_.reset();
  clear(out, 0, "engine restarted (sequence reset)");
}

void batch_router::on_engine_asleep(router_output& out) {
  reset(out);
  clear(out, 0, "engine asleep (sleep mode discards its KV cache)");
}

void batch_router::add_adapter(int64_t id, std::string name) {
  opts_.adapters[id] = std::move(name);
  warned_ids_.erase(id);
}

void batch_router::export_state(snapshot::pipeline_snapshot& out) const {
  out.epoch = epoch_;
  out.adapters.assign(opts_.adapters.begin(), opts_.adapters.end());
  out.group_kinds = groups_.export_kinds();
}

void batch_router::import_state(const snapshot::pipeline_snapshot& in) {
  // The epoch stays 1: a new data path's epochs restart with its debouncer's (the snapshot's
  // is the old process's count, kept in the file for the log).
  for (const auto& [id, name] : in.adapters) opts_.adapters.emplace(id, name);
  groups_.import_kinds(in.group_kinds);
  partition_ids_.clear();
  // Ids are positions, as the shard imports them (a name twice keeps its first id).
  const size_t n = std::min<size_t>(in.partitions.size(), opts_.max_partitions);
  for (size_t i = 0; i < n; ++i)
    partition_ids_.emplace(in.partitions[i].adapter, static_cast<uint32_t>(i));
}

}  // namespace kvrelay
