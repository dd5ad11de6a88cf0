// SPDX-License-Identifier: Apache-2.0
// offheap: an embedded key-value store whose records, index and bookkeeping
// live in memory-mapped chunks outside the process heap. Include this header
// for everything.
#pragma once

#include <offheap/codec.hpp>
#include <offheap/compute.hpp>
#include <offheap/cursor.hpp>
#include <offheap/error.hpp>
#include <offheap/expiry.hpp>
#include <offheap/options.hpp>
#include <offheap/policy.hpp>
#include <offheap/stats.hpp>
#include <offheap/store.hpp>
#include <offheap/value_type.hpp>
#include <offheap/version.hpp>
#include <offheap/view.hpp>
