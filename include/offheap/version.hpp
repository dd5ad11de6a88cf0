// SPDX-License-Identifier: Apache-2.0
// Library version and the on-disk format version.
//
// The two move independently. The library version follows semver: a new
// major version may change the API, a minor adds to it, a patch fixes.
// The format version describes the bytes a store leaves in its files (the
// meta file, chunk files and state files of detail/files/format.hpp, the record
// header and checksum of detail/journal/record.hpp). Bump rule:
// any change that makes an older library misread a newer file, or a newer
// library misread an older file, bumps kFormatVersion; a store refuses to
// open a file whose format version differs from its own
// (Errc::format_version). Changes that do not touch bytes on disk never bump it.
//
// Thread safety and memory: constants only.
#pragma once

#include <cstdint>

#define OFFHEAP_VERSION_MAJOR 0
#define OFFHEAP_VERSION_MINOR 1
#define OFFHEAP_VERSION_PATCH 0

namespace offheap {

inline constexpr std::uint32_t kVersionMajor = OFFHEAP_VERSION_MAJOR;
inline constexpr std::uint32_t kVersionMinor = OFFHEAP_VERSION_MINOR;
inline constexpr std::uint32_t kVersionPatch = OFFHEAP_VERSION_PATCH;

/// The on-disk format version (see the bump rule above).
inline constexpr std::uint32_t kFormatVersion = 4;  // 2: the clear mark in chunk 0's header; 3: record deadlines (expiry); 4: the node word in the expiry half

}  // namespace offheap
