// SPDX-License-Identifier: Apache-2.0
// The store's calls for code that does not throw: open(options, ec) and the
// writes taking a std::error_code&. Each runs the throwing form and turns
// what it throws into ec. The throwing form changes nothing when it throws
// (error.hpp), so neither does its twin when it sets ec.
#pragma once

#include <offheap/store.hpp>

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

}  // namespace offheap::detail

namespace offheap {

template <Policy P>
std::unique_ptr<OffHeapStore<P>> OffHeapStore<P>::open(Options options, std::error_code& ec,
                                                       std::string* message) noexcept {
  return detail::no_throw(ec, message, std::unique_ptr<OffHeapStore>(),
                          [&] { return std::make_unique<OffHeapStore>(std::move(options)); });
}

template <Policy P>
Computed OffHeapStore<P>::put(std::string_view key, std::string_view value, std::error_code& ec,
                              Ttl ttl) noexcept {
  return detail::no_throw(ec, nullptr, Computed::unchanged, [&] { return put(key, value, ttl); });
}

template <Policy P>
bool OffHeapStore<P>::put_if_absent(std::string_view key, std::string_view value, std::error_code& ec,
                                    Ttl ttl) noexcept {
  return detail::no_throw(ec, nullptr, false, [&] { return put_if_absent(key, value, ttl); });
}

template <Policy P>
bool OffHeapStore<P>::replace(std::string_view key, std::string_view value, std::error_code& ec,
                              Ttl ttl) noexcept {
  return detail::no_throw(ec, nullptr, false, [&] { return replace(key, value, ttl); });
}

template <Policy P>
bool OffHeapStore<P>::replace(std::string_view key, std::string_view expected, std::string_view desired,
                              std::error_code& ec, Ttl ttl) noexcept {
  return detail::no_throw(ec, nullptr, false, [&] { return replace(key, expected, desired, ttl); });
}

template <Policy P>
bool OffHeapStore<P>::remove(std::string_view key, std::error_code& ec) noexcept {
  return detail::no_throw(ec, nullptr, false, [&] { return remove(key); });
}

template <Policy P>
bool OffHeapStore<P>::remove(std::string_view key, std::string_view expected, std::error_code& ec) noexcept {
  return detail::no_throw(ec, nullptr, false, [&] { return remove(key, expected); });
}

template <Policy P>
template <class T>
  requires PaddingFreeValue<T>
Computed OffHeapStore<P>::put_value(std::string_view key, const T& value, std::error_code& ec,
                                    Ttl ttl) noexcept {
  return detail::no_throw(ec, nullptr, Computed::unchanged, [&] { return put_value(key, value, ttl); });
}

template <Policy P>
void OffHeapStore<P>::clear(std::error_code& ec) noexcept {
  detail::no_throw(ec, nullptr, detail::Done{}, [&] {
    clear();
    return detail::Done{};
  });
}

template <Policy P>
void OffHeapStore<P>::sync(std::error_code& ec) noexcept {
  detail::no_throw(ec, nullptr, detail::Done{}, [&] {
    sync();
    return detail::Done{};
  });
}

template <Policy P>
void OffHeapStore<P>::close(std::error_code& ec) noexcept {
  detail::no_throw(ec, nullptr, detail::Done{}, [&] {
    close();
    return detail::Done{};
  });
}

}  // namespace offheap
