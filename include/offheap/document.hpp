// SPDX-License-Identifier: Apache-2.0
// The document layer's types in one include: Value (value.hpp), Document
// (document.hpp), DocumentView and ValueView (document_view.hpp,
// value_view.hpp), ordered index keys (ordered_key.hpp); the encoding is
// drawn in document/format.hpp and the text form in document/text.hpp.
//
// Thread safety and memory: Value and Document are ordinary owning value
// types (concurrent const use is safe); DocumentView, ValueView and
// ListView point into the bytes they were parsed from and are valid only
// while those bytes stay alive and unchanged (document_view.hpp).
#pragma once

#include <offheap/document/document.hpp>
#include <offheap/document/document_view.hpp>
#include <offheap/document/format.hpp>
#include <offheap/document/ordered_key.hpp>
#include <offheap/document/text.hpp>
#include <offheap/document/value.hpp>
#include <offheap/document/value_view.hpp>
