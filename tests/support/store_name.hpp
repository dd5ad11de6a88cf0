// SPDX-License-Identifier: Apache-2.0
// A store's name and memory budget (no limit) for tests that build engine
// parts directly, as a store hands its own to them (detail/memory/memory_budget.hpp).
#pragma once

#include <offheap/detail/memory/memory_budget.hpp>

#include <deque>
#include <mutex>
#include <string>

namespace offheap_test {

/// One per call, kept for the whole run (parts hold a reference to it).
inline const offheap::detail::StoreName& store_name(const char* text) {
  static std::mutex m;
  static std::deque<std::string> texts;
  static std::deque<offheap::detail::StoreName> names;
  const std::lock_guard<std::mutex> g(m);
  texts.emplace_back(text);
  return names.emplace_back(texts.back(), 0);
}

}  // namespace offheap_test
