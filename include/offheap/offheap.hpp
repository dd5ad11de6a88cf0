// SPDX-License-Identifier: Apache-2.0
// offheap: an embedded key-value store whose records, index and bookkeeping
// live in memory-mapped chunks outside the process heap. Include this header
// for the key-value store and the caches; the map below says which header
// holds what (each opens with what it offers, its thread-safety, and how
// long the memory it hands out stays valid).
//
//   store.hpp       OffHeapStore<Policy> and its names: Store, Cache,
//                   LruCache, TinyLfuCache (OffHeapStore<SingleWriterPolicy>
//                   for one writer thread, no lock); every call,
//                   its errors, and the lifetime of each view and callback
//                   argument; minimum_memory_limit()
//   options.hpp     Options: where it lives (the files), durability modes
//                   and what survives a power loss, capacity, shards, chunk
//                   sizes, compaction, the memory limit (and how its least
//                   value is made up), the clock, the removal listener
//   policy.hpp      the compile-time policies (locks, hashing, in-place
//                   updates, eviction), the Policy concept, and how caches
//                   hold their capacity and see readers' hits
//   eviction/       the eviction policies: S3-FIFO (s3fifo.hpp), LRU
//                   (lru.hpp), W-TinyLFU (w_tiny_lfu.hpp), none (none.hpp),
//                   and the concept a policy satisfies (policy.hpp)
//   view.hpp        RecordView: a zero-copy handle on one record's version
//   compute.hpp     what compute() and its forms did (Computed)
//   codec.hpp       Codec<T>: put_as / get_as for types that are not bytes
//   value_type.hpp  type tags of put_value / get_value
//   cursor.hpp      Cursor: where a resumable walk (scan) stands
//   expiry.hpp      Clock and Ttl, and what a deadline does to reads
//   removal.hpp     RemovalListener and RemovalCause: which cause a removal
//                   is reported with
//   stats.hpp       Stats: what stats() reports, counter by counter
//   error.hpp       Error and Errc (also as std::error_code)
//   version.hpp     the library's and the on-disk format's versions
//
// Not included here (each layer is a header of its own):
//   document.hpp    documents with secondary indexes (document/: Value,
//                   Document, DocumentView, Collection, queries)
//   graph.hpp       graphs with traversals (graph/: Graph, BFS, DFS,
//                   shortest paths)
//
// detail/ is the engine below the public API; nothing there is API.
#pragma once

#include <offheap/codec.hpp>
#include <offheap/compute.hpp>
#include <offheap/cursor.hpp>
#include <offheap/error.hpp>
#include <offheap/expiry.hpp>
#include <offheap/options.hpp>
#include <offheap/policy.hpp>
#include <offheap/removal.hpp>
#include <offheap/stats.hpp>
#include <offheap/store.hpp>
#include <offheap/value_type.hpp>
#include <offheap/version.hpp>
#include <offheap/view.hpp>
