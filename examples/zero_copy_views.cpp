// SPDX-License-Identifier: Apache-2.0
// Reading values where they lie: read() with a callback, and RecordView,
// which notices when the record it points at changes.
#include <offheap/offheap.hpp>

#include <cstdio>
#include <string>

int main() {
  offheap::Store store;
  store.put("doc:7", std::string(4096, 'a'));

  // read(): the callback sees the bytes in place; nothing is copied.
  std::size_t as = 0;
  store.read("doc:7", [&](std::string_view bytes) {
    as = 0;  // the callback may run again if a writer raced it: start over
    for (char c : bytes) as += (c == 'a');
  });
  std::printf("doc:7 holds %zu 'a' bytes\n", as);

  // A view remembers the record's version stamp.
  offheap::Store::View view = store.view("doc:7");
  view.read([](std::string_view bytes) { std::printf("view: %zu bytes\n", bytes.size()); });

  store.put("doc:7", "rewritten");  // the record the view saw is gone
  try {
    view.read([](std::string_view) {});
  } catch (const offheap::StaleView& e) {
    std::printf("stale as expected: %s\n", e.what());
  }
  std::printf("status: %s\n", view.status() == offheap::ViewStatus::updated ? "updated" : "?");

  offheap::Store::View fresh = view.refresh();
  fresh.read([](std::string_view bytes) {
    std::printf("refreshed: %.*s\n", int(bytes.size()), bytes.data());
  });

  store.remove("doc:7");
  return view.status() == offheap::ViewStatus::removed && !store.view("doc:7") ? 0 : 1;
}
