// SPDX-License-Identifier: Apache-2.0
// The error code of the offheap::Error a call throws (its message too, if
// asked); the test fails if it throws none.
#pragma once

#include <offheap/error.hpp>

#include <catch2/catch.hpp>

#include <string>

namespace offheap_test {

template <class F>
offheap::Errc error_of(F&& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const offheap::Error& e) {
    if (message != nullptr) *message = e.what();
    return e.code();
  }
  FAIL("no offheap::Error was thrown");
  return offheap::Errc::closed;
}

}  // namespace offheap_test
