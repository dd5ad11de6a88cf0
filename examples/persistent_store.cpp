// SPDX-License-Identifier: Apache-2.0
// A store that lives in files: written, closed, reopened with everything it
// had. Run with a directory (created if missing; the default is a fresh one
// under /tmp, removed at the end).
#include <offheap/offheap.hpp>

#include <cstdio>
#include <optional>
#include <cstdlib>
#include <filesystem>
#include <string>

int main(int argc, char** argv) {
  char tmpl[] = "/tmp/offheap-example-XXXXXX";
  const bool own = argc < 2;
  const std::filesystem::path dir = own ? std::filesystem::path(::mkdtemp(tmpl)) / "store" : argv[1];

  offheap::Options options;
  options.path = dir;                                    // a directory of files
  options.durability = offheap::Durability::periodic;   // synced every sync_interval
  options.sync_interval = std::chrono::milliseconds(200);
  {
    offheap::Store store(options);                       // creates the store, or reopens it
    store.put("config:mode", "fast");
    store.put_value("counter", std::uint64_t{41});
    store.compute_value<std::uint64_t>("counter", [](std::optional<std::uint64_t> n) {  // atomic +1
      return std::optional<std::uint64_t>(n.value_or(0) + 1);
    });
    store.remove("config:mode");
    store.sync();                                        // on disk now, whatever happens next
  }                                                      // clean close: index saved for a fast reopen

  offheap::Store store(options);                         // maps the saved index: no scan
  const offheap::Stats stats = store.stats();
  std::printf("reopened %s: %llu records in %.4f s (%s)\n", dir.c_str(),
              static_cast<unsigned long long>(store.size()), stats.open_seconds,
              stats.rebuilt ? "rebuilt from the records" : "clean");
  const bool ok = store.get_value<std::uint64_t>("counter") >= 42 && !store.contains("config:mode");
  if (own) {
    store.close();
    std::filesystem::remove_all(dir.parent_path());
  }
  return ok ? 0 : 1;
}
