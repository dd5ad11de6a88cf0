// SPDX-License-Identifier: Apache-2.0
// offheap::Graph: nodes and directed or undirected edges with Document
// properties, kept in an offheap::Store (graph/graph.hpp says how), with
// iterative traversals and shortest paths (graph/detail/search.hpp).
//
// Thread safety and memory: graph/graph.hpp says both (one writer at a
// time, lock-free readers; nothing handed out points into the store).
#pragma once

#include <offheap/graph/detail/adjacency.hpp>
#include <offheap/graph/graph.hpp>
#include <offheap/graph/detail/id_table.hpp>
#include <offheap/graph/detail/layout.hpp>
#include <offheap/graph/detail/check.hpp>
#include <offheap/graph/detail/search.hpp>
#include <offheap/graph/types.hpp>
