// SPDX-License-Identifier: Apache-2.0
// The store's calls for code that does not throw (open(options, ec) and
// the writes taking a std::error_code&, in store.hpp) run the throwing form
// through no_throw(), which turns what it throws into ec. The throwing form changes nothing when it throws
// (error.hpp), so neither does its twin when it sets ec.
#pragma once

#include <offheap/error.hpp>

#include <exception>

#include <new>
#include <string>
#include <system_error>
#include <utility>

namespace offheap::detail {

/// Runs fn(); on success clears ec and returns what fn returned; on an
/// offheap::Error sets ec to its Errc (and *message to its text, if given)
/// and returns `failed`. The heap refusing (std::bad_alloc) is
/// std::errc::not_enough_memory; a std::system_error (a mutex the OS
/// refused) its own code. Nothing escapes: what else could throw is only
/// the callbacks the throwing forms take, which these twins do not.
template <class R, class F>
R no_throw(std::error_code& ec, std::string* message, R failed, F&& fn) noexcept {
  const auto say = [&](const char* text) noexcept {
    if (message == nullptr) return;
    try {
      *message = text;
    } catch (...) {
      message->clear();  // no room for the text: the code alone
    }
  };
  try {
    R r = fn();
    ec.clear();
    return r;
  } catch (const Error& e) {
    ec = e.code();
    say(e.what());
  } catch (const std::bad_alloc& e) {
    ec = std::make_error_code(std::errc::not_enough_memory);
    say(e.what());
  } catch (const std::system_error& e) {
    ec = e.code();
    say(e.what());
  } catch (const std::exception& e) {
    ec = std::make_error_code(std::errc::io_error);
    say(e.what());
  } catch (...) {
    ec = std::make_error_code(std::errc::io_error);
    say("an unknown exception");
  }
  return failed;
}

struct Done {};  // the result of a twin of a call returning void

/// no_throw() for a call returning void.
template <class F>
void no_throw_void(std::error_code& ec, F&& fn) noexcept {
  (void)no_throw(ec, nullptr, Done{}, [&] {
    fn();
    return Done{};
  });
}

}  // namespace offheap::detail
