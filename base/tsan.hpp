// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Happens-before edges ThreadSanitizer cannot see by itself. Debian's CAF is not instrumented:
// the queues a message travels through (mailboxes, the scheduler's job queues) synchronise with
// atomics TSan never observes, so data built on one thread and read on another after a CAF
// message reads as a race although CAF orders it. Where our code hands data across threads
// through CAF and TSan reported it, the sender calls `handoff_publish()` right before sending
// and the receiver `handoff_consume()` right after receiving. Without -fsanitize=thread both
// compile to nothing. One token for every handoff: it over-orders (hides races between two
// threads that both hand off), which is why it is used only at such boundaries.

#if defined(__SANITIZE_THREAD__)
#define KVRELAY_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KVRELAY_TSAN 1
#endif
#endif

#ifdef KVRELAY_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace kvrelay::tsan {

#ifdef KVRELAY_TSAN
inline char handoff_token;
inline void handoff_publish() { __tsan_release(&handoff_token); }
inline void handoff_consume() { __tsan_acquire(&handoff_token); }
#else
inline void handoff_publish() {}
inline void handoff_consume() {}
#endif

/// `v`, after a publish: for a reply built on this thread and read on the asker's.
template <class T>
T published(T v) {
  handoff_publish();
  return v;
}

}  // namespace kvrelay::tsan
