// SPDX-License-Identifier: Apache-2.0
#include <offheap/offheap.hpp>

#include <cstdio>
#include <string>

int main() {
  offheap::Store store;
  store.put("installed", "yes");
  std::string out;
  if (!store.get("installed", out) || out != "yes" || store.size() != 1) {
    std::puts("consumer: wrong answer from an installed offheap");
    return 1;
  }
  std::printf("consumer: offheap %u.%u.%u works from its install prefix\n",
              offheap::kVersionMajor, offheap::kVersionMinor, offheap::kVersionPatch);
  return 0;
}
