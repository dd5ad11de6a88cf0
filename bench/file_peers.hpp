// SPDX-License-Identifier: Apache-2.0
// The embedded key-value stores with files that offheap::Store is measured
// beside: LMDB (Debian liblmdb-dev), RocksDB (librocksdb-dev) and Tkrzw's
// HashDBM (libtkrzw-dev), each compiled in only when CMake found it
// (OFFHEAP_BENCH_HAVE_LMDB, _ROCKSDB, _TKRZW). See subjects.hpp for what a
// subject is.
//
// Each keeps its files in a fresh directory on tmpfs (scratch_dir.hpp),
// removed with the subject, and runs with its no-sync options: nothing waits
// for a disk, as nothing does in offheap's anonymous store. Each takes the
// caller's key bytes as they are (MDB_val, rocksdb::Slice, std::string_view:
// no copy) and copies the value out into the caller's reused std::string, as
// offheap's get does.
//
//   LMDB     one environment, the unnamed database; MDB_NOSYNC |
//            MDB_NOMETASYNC | MDB_WRITEMAP (writes go straight to the map) |
//            MDB_NORDAHEAD | MDB_NOTLS (read transactions belong to their
//            handle, not to the thread); a 64 GiB map (address space, sparse
//            on tmpfs: LMDB has no other sizing knob, and the map never
//            fills). get: each thread keeps one read-only transaction, reset
//            between gets and renewed for each, as LMDB's documentation
//            recommends for short reads; put: one write transaction per put
//            (a key-value put stands on its own), committed.
//   RocksDB  Options::OptimizeForPointLookup (block-based tables with a
//            hash index in data blocks, a 10-bit bloom filter, whole-key
//            filtering in the memtable, an LRU block cache of
//            --rocksdb_cache_mb), IncreaseParallelism(hardware threads),
//            no compression (tmpfs: every block read is a memory copy, which
//            decompression would only slow), allow_mmap_reads. Measured on
//            this bench's 2-vCPU machine, random Gets of 10M decimal keys:
//            0.26 Mops/s with mmap reads and the 64 MiB cache, 0.10-0.17
//            without, 0.24 without them but with a 1 GiB cache; turning
//            ReadOptions::verify_checksums off gained nothing (0.25), so it
//            stays on. --rocksdb_mmap_reads and --rocksdb_cache_mb try
//            others. WriteOptions: sync = false, disableWAL = true. get: Get
//            into the thread's PinnableSlice, copy out, Reset. An LSM tree
//            has no pre-size.
//   Tkrzw    HashDBM on its default file class (MemoryMapParallelFile),
//            in-place updates, num_buckets = the expected entries when
//            pre-sized, else its default (1,048,583; HashDBM does not grow
//            its bucket array by itself). No sync is ever asked for. Every
//            HashDBM operation is thread-safe (its documentation), so threads
//            share it directly (ShardDBM spreads one database over several
//            files, which a map of this size has no use for).
//            get: Get(string_view, &out); put: Set(string_view, string_view).
#pragma once

#include "scratch_dir.hpp"
#include "subjects.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#if defined(OFFHEAP_BENCH_HAVE_LMDB)
#include <lmdb.h>
#endif
#if defined(OFFHEAP_BENCH_HAVE_ROCKSDB)
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/version.h>
#endif
#if defined(OFFHEAP_BENCH_HAVE_TKRZW)
#include <tkrzw_dbm_hash.h>
#include <tkrzw_lib_common.h>
#endif

namespace offheap_bench {

/// A peer library's error: the bench stops with its message.
[[noreturn]] inline void peer_failed(const char* library, const std::string& what) {
  throw std::runtime_error(std::string(library) + ": " + what);
}

#if defined(OFFHEAP_BENCH_HAVE_LMDB)
class LmdbSubject {
 public:
  static constexpr const char* kName = "LMDB";
  static constexpr bool kThreadSafe = true;
  static constexpr unsigned kFlags =
      MDB_NOSYNC | MDB_NOMETASYNC | MDB_WRITEMAP | MDB_NORDAHEAD | MDB_NOTLS;
  static constexpr std::size_t kMapBytes = std::size_t{64} << 30;

  /// One read-only transaction per thread, kept reset between gets.
  class Session {
   public:
    explicit Session(LmdbSubject& s) {
      check(mdb_txn_begin(s.env_, nullptr, MDB_RDONLY, &txn_), "mdb_txn_begin (read)");
      mdb_txn_reset(txn_);
    }
    ~Session() { mdb_txn_abort(txn_); }
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

   private:
    friend class LmdbSubject;
    MDB_txn* txn_ = nullptr;
  };

  static std::string describe() {
    return std::string(MDB_VERSION_STRING) +
           ", files on tmpfs, MDB_NOSYNC | MDB_NOMETASYNC | MDB_WRITEMAP | MDB_NORDAHEAD | "
           "MDB_NOTLS; get: a per-thread read transaction renewed and reset around mdb_get, "
           "copy out; put: one write transaction per put (mdb_put, commit)";
  }
  static std::string sizing(std::uint64_t /*n*/) {
    return "a 64 GiB map (sparse; its only sizing knob, the same pre-sized or not)";
  }

  explicit LmdbSubject(std::uint64_t /*expected_entries*/) : dir_(ScratchDir::instance().make("lmdb")) {
    check(mdb_env_create(&env_), "mdb_env_create");
    check(mdb_env_set_mapsize(env_, kMapBytes), "mdb_env_set_mapsize");
    check(mdb_env_open(env_, dir_.c_str(), kFlags, 0644), "mdb_env_open");
    MDB_txn* txn = nullptr;
    check(mdb_txn_begin(env_, nullptr, 0, &txn), "mdb_txn_begin");
    check(mdb_dbi_open(txn, nullptr, 0, &dbi_), "mdb_dbi_open");
    check(mdb_txn_commit(txn), "mdb_txn_commit");
  }
  ~LmdbSubject() {
    mdb_env_close(env_);
    ScratchDir::remove(dir_);
  }
  LmdbSubject(const LmdbSubject&) = delete;
  LmdbSubject& operator=(const LmdbSubject&) = delete;

  void put(Session&, std::string_view key, std::string_view value) {
    MDB_txn* txn = nullptr;
    check(mdb_txn_begin(env_, nullptr, 0, &txn), "mdb_txn_begin");
    MDB_val k = val(key), v = val(value);
    if (const int rc = mdb_put(txn, dbi_, &k, &v, 0); rc != 0) {
      mdb_txn_abort(txn);
      check(rc, "mdb_put");
    }
    check(mdb_txn_commit(txn), "mdb_txn_commit");
  }

  bool get(Session& s, std::string_view key, std::string& out) {
    check(mdb_txn_renew(s.txn_), "mdb_txn_renew");
    MDB_val k = val(key), v{};
    const int rc = mdb_get(s.txn_, dbi_, &k, &v);
    if (rc == 0) out.assign(static_cast<const char*>(v.mv_data), v.mv_size);
    mdb_txn_reset(s.txn_);
    if (rc != 0 && rc != MDB_NOTFOUND) check(rc, "mdb_get");
    return rc == 0;
  }

  void settle() noexcept {}
  const std::filesystem::path& files() const noexcept { return dir_; }

 private:
  static MDB_val val(std::string_view s) noexcept {
    return MDB_val{s.size(), const_cast<char*>(s.data())};
  }
  static void check(int rc, const char* what) {
    if (rc != 0) peer_failed("LMDB", std::string(what) + ": " + mdb_strerror(rc));
  }

  std::filesystem::path dir_;
  MDB_env* env_ = nullptr;
  MDB_dbi dbi_ = 0;
};
#endif

#if defined(OFFHEAP_BENCH_HAVE_ROCKSDB)
/// RocksDB's knobs that the bench lets a user try (flags --rocksdb_*).
struct RocksSettings {
  bool mmap_reads = true;
  std::uint64_t cache_mb = 64;
};
inline RocksSettings g_rocks;

class RocksSubject {
 public:
  static constexpr const char* kName = "RocksDB";
  static constexpr bool kThreadSafe = true;

  /// What one thread reuses from get to get.
  class Session {
   public:
    explicit Session(RocksSubject&) {}

   private:
    friend class RocksSubject;
    rocksdb::ReadOptions read_;
    rocksdb::PinnableSlice value_;
  };

  static std::string describe() {
    return "RocksDB " + rocksdb::GetRocksVersionAsString() +
           ", files on tmpfs, OptimizeForPointLookup (bloom filter, data-block hash index, " +
           std::to_string(g_rocks.cache_mb) + " MiB block cache), IncreaseParallelism(" +
           std::to_string(threads()) + "), no compression, allow_mmap_reads = " +
           (g_rocks.mmap_reads ? "true" : "false") +
           "; WriteOptions sync = false, disableWAL = true; get: Get into a per-thread "
           "PinnableSlice, copy out; put: Put";
  }
  static std::string sizing(std::uint64_t /*n*/) {
    return "no sizing knob (LSM tree), the same pre-sized or not";
  }

  explicit RocksSubject(std::uint64_t /*expected_entries*/)
      : dir_(ScratchDir::instance().make("rocksdb")) {
    rocksdb::Options o;
    o.create_if_missing = true;
    o.error_if_exists = true;
    o.IncreaseParallelism(threads());
    o.OptimizeForPointLookup(g_rocks.cache_mb);
    o.compression = rocksdb::kNoCompression;
    o.allow_mmap_reads = g_rocks.mmap_reads;
    rocksdb::DB* db = nullptr;
    check(rocksdb::DB::Open(o, dir_.string(), &db), "DB::Open");
    db_.reset(db);
    write_.sync = false;
    write_.disableWAL = true;
  }
  ~RocksSubject() {
    if (db_) db_->Close().PermitUncheckedError();
    db_.reset();
    ScratchDir::remove(dir_);
  }
  RocksSubject(const RocksSubject&) = delete;
  RocksSubject& operator=(const RocksSubject&) = delete;

  void put(Session&, std::string_view key, std::string_view value) {
    check(db_->Put(write_, slice(key), slice(value)), "Put");
  }

  bool get(Session& s, std::string_view key, std::string& out) {
    const rocksdb::Status st = db_->Get(s.read_, db_->DefaultColumnFamily(), slice(key), &s.value_);
    if (st.IsNotFound()) return false;
    check(st, "Get");
    out.assign(s.value_.data(), s.value_.size());
    s.value_.Reset();
    return true;
  }

  void settle() noexcept {}
  const std::filesystem::path& files() const noexcept { return dir_; }

 private:
  static int threads() noexcept {
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 2 : static_cast<int>(n);
  }
  static rocksdb::Slice slice(std::string_view s) noexcept { return {s.data(), s.size()}; }
  static void check(const rocksdb::Status& st, const char* what) {
    if (!st.ok()) peer_failed("RocksDB", std::string(what) + ": " + st.ToString());
  }

  std::filesystem::path dir_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::WriteOptions write_;
};
#endif

#if defined(OFFHEAP_BENCH_HAVE_TKRZW)
class TkrzwSubject {
 public:
  static constexpr const char* kName = "tkrzw::HashDBM";
  static constexpr bool kThreadSafe = true;
  using Session = NoSession<TkrzwSubject>;

  static std::string describe() {
    return std::string("Tkrzw ") + tkrzw::PACKAGE_VERSION +
           ", HashDBM on a tmpfs file (MemoryMapParallelFile, its default), in-place updates, "
           "never synced; shared by threads directly (thread-safe); get: Get(string_view, "
           "&out); put: Set(string_view, string_view)";
  }
  static std::string sizing(std::uint64_t n) {
    return n != 0 ? "num_buckets = " + std::to_string(n)
                  : "default num_buckets (1,048,583; HashDBM never grows it by itself)";
  }

  explicit TkrzwSubject(std::uint64_t expected_entries)
      : dir_(ScratchDir::instance().make("tkrzw")) {
    tkrzw::HashDBM::TuningParameters p;
    p.update_mode = tkrzw::HashDBM::UPDATE_IN_PLACE;
    if (expected_entries != 0) p.num_buckets = static_cast<std::int64_t>(expected_entries);
    check(db_.OpenAdvanced((dir_ / "data.tkh").string(), true, tkrzw::File::OPEN_TRUNCATE, p),
          "OpenAdvanced");
  }
  ~TkrzwSubject() {
    db_.Close();
    ScratchDir::remove(dir_);
  }
  TkrzwSubject(const TkrzwSubject&) = delete;
  TkrzwSubject& operator=(const TkrzwSubject&) = delete;

  void put(Session&, std::string_view key, std::string_view value) {
    check(db_.Set(key, value), "Set");
  }

  bool get(Session&, std::string_view key, std::string& out) {
    const tkrzw::Status st = db_.Get(key, &out);
    if (st == tkrzw::Status::NOT_FOUND_ERROR) return false;
    check(st, "Get");
    return true;
  }

  void settle() noexcept {}
  const std::filesystem::path& files() const noexcept { return dir_; }

 private:
  static void check(const tkrzw::Status& st, const char* what) {
    if (st != tkrzw::Status::SUCCESS) peer_failed("Tkrzw", std::string(what) + ": " + tkrzw::ToString(st));
  }

  std::filesystem::path dir_;
  tkrzw::HashDBM db_;
};
#endif

}  // namespace offheap_bench
