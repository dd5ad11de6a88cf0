// SPDX-License-Identifier: Apache-2.0
// The document layer's types in one include: Value (value.hpp), Document
// (document.hpp), DocumentView and ValueView (document_view.hpp,
// value_view.hpp), ordered index keys (ordered_key.hpp); the encoding is
// drawn in document/format.hpp and the text form in document/text.hpp.
#pragma once

#include <offheap/document/document.hpp>
#include <offheap/document/document_view.hpp>
#include <offheap/document/format.hpp>
#include <offheap/document/ordered_key.hpp>
#include <offheap/document/text.hpp>
#include <offheap/document/value.hpp>
#include <offheap/document/value_view.hpp>
