# SPDX-License-Identifier: Apache-2.0
# No header includes one above it: every header of include/offheap/ belongs
# to a layer, and includes only headers of its own layer or below. The
# layers, from the bottom (a path matches the first pattern that fits):
#
#   0 vocabulary  the types every layer speaks: error, version, expiry,
#                 removal, stats, compute, value_type, options, codec
#   1 memory      detail/memory/: the OS, the memory budget, mapped arrays
#   2 index       detail/index/: hash, location, the index table
#   3 journal     detail/files/{file,format}, detail/journal/: files, the
#                 record, chunks, free lists
#   4 policies    detail/expiry/wheel, detail/cache/{hit_buffers,ghost_set,
#                 count_min,node_list}, eviction/, policy.hpp, cursor.hpp
#   5 shard       detail/shard/ and the shard's components: compaction/,
#                 expiry/expiry_shard, cache/{removal_reports,cache_host},
#                 files/{state_file,recovery,durability,integrity},
#                 index/index_growth, journal/{space,walk}
#   6 store parts detail/files/store_files, detail/store/
#   7 the store   store.hpp, view.hpp, offheap.hpp
#   8 documents   document.hpp, document/
#   9 graphs      graph.hpp, graph/
#   8 memcache    memcache/: memcached's protocols over a store (beside
#                 the documents: neither uses the other)
#
# Run: cmake -DINCLUDE_DIR=<repo>/include -P tests/layering.cmake
cmake_minimum_required(VERSION 3.20)

function(layer_of path out)
  set(rank -1)
  if(path MATCHES "^offheap/(error|version|expiry|removal|stats|compute|value_type|options|codec)\\.hpp$")
    set(rank 0)
  elseif(path MATCHES "^offheap/detail/memory/")
    set(rank 1)
  elseif(path MATCHES "^offheap/detail/index/index_growth\\.hpp$")
    set(rank 5)
  elseif(path MATCHES "^offheap/detail/index/")
    set(rank 2)
  elseif(path MATCHES "^offheap/detail/files/(file|format)\\.hpp$")
    set(rank 3)
  elseif(path MATCHES "^offheap/detail/journal/(space|walk)\\.hpp$")
    set(rank 5)
  elseif(path MATCHES "^offheap/detail/journal/")
    set(rank 3)
  elseif(path MATCHES "^offheap/detail/expiry/wheel\\.hpp$"
         OR path MATCHES "^offheap/detail/cache/(hit_buffers|ghost_set|count_min|node_list)\\.hpp$"
         OR path MATCHES "^offheap/eviction/"
         OR path MATCHES "^offheap/(policy|cursor)\\.hpp$")
    set(rank 4)
  elseif(path MATCHES "^offheap/detail/(shard|compaction)/"
         OR path MATCHES "^offheap/detail/expiry/expiry_shard\\.hpp$"
         OR path MATCHES "^offheap/detail/cache/(removal_reports|cache_host)\\.hpp$"
         OR path MATCHES "^offheap/detail/files/(state_file|recovery|durability|integrity)\\.hpp$")
    set(rank 5)
  elseif(path MATCHES "^offheap/detail/files/store_files\\.hpp$" OR path MATCHES "^offheap/detail/store/")
    set(rank 6)
  elseif(path MATCHES "^offheap/(store|view|offheap)\\.hpp$")
    set(rank 7)
  elseif(path MATCHES "^offheap/document(\\.hpp$|/)")
    set(rank 8)
  elseif(path MATCHES "^offheap/memcache/")
    set(rank 8)
  elseif(path MATCHES "^offheap/graph(\\.hpp$|/)")
    set(rank 9)
  endif()
  set(${out} ${rank} PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE headers RELATIVE ${INCLUDE_DIR} ${INCLUDE_DIR}/offheap/*.hpp)
set(problems "")
set(count 0)
foreach(header IN LISTS headers)
  layer_of(${header} from)
  if(from EQUAL -1)
    string(APPEND problems "\n  ${header}: in no layer (add it to tests/layering.cmake)")
    continue()
  endif()
  file(STRINGS ${INCLUDE_DIR}/${header} lines REGEX "^#include <offheap/")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^#include <([^>]+)>.*" "\\1" target "${line}")
    layer_of(${target} to)
    math(EXPR count "${count} + 1")
    if(to GREATER from)
      string(APPEND problems "\n  ${header} (layer ${from}) includes ${target} (layer ${to})")
    endif()
  endforeach()
endforeach()
if(problems)
  message(FATAL_ERROR "headers that include one above them:${problems}")
endif()
list(LENGTH headers n)
message(STATUS "${n} headers, ${count} includes: none goes up a layer")
