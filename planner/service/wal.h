// A write-ahead log: an append-only file of length- and checksum-framed
// records that rematd replays on start.
//
// File format: the 8-byte magic "RMTWAL01", then records, each
//   u32 little-endian payload length | u32 little-endian CRC-32C of
//   (the 4 length bytes + payload) | payload
// A record is valid when it is complete and its checksum matches. Replay
// stops at the first invalid record (a torn write from a crash, or
// corruption); Open truncates the file there, so later appends are never
// hidden behind garbage, and reports how many bytes it dropped.
//
// Durability: Append returns OK only after the record is written and
// fdatasync'd. Concurrent Appends share one write+fdatasync (group commit):
// a caller is acknowledged only once a sync that covered its record has
// completed. After a failed write or sync the log is broken and every
// later Append fails (the file's tail is unknown until the next Open).
//
// Compaction: Compact replaces the whole log with a rewritten list of
// records: written to a new file, synced, then renamed over the log, so a
// crash leaves either the old log or the new one, never a mix. The records
// stream through a buffer on both sides (neither log is held whole), and
// afterwards the allocator is asked to return free memory to the system:
// a compaction's rewrite allocates a log's worth of parsed records for a
// moment, and tcmalloc keeps freed pages mapped, so without it the
// daemon's resident size grew by that much, compaction after compaction.
//
// Thread safety: Append and Compact may be called concurrently (Appends
// wait while a compaction writes); Open and the destructor may not overlap
// with anything.
#ifndef REMAT_PLANNER_SERVICE_WAL_H_
#define REMAT_PLANNER_SERVICE_WAL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace remat {

struct WalRecovery {
  uint64_t records = 0;        // valid records replayed
  uint64_t valid_bytes = 0;    // file size kept (magic included)
  uint64_t dropped_bytes = 0;  // torn or corrupt tail cut off
  std::string dropped_reason;  // why the tail was dropped; empty if none
};

class Wal {
 public:
  // Records longer than this are refused by Append and, when read, treated
  // as corruption.
  static constexpr uint32_t kMaxRecordBytes = 256u << 20;

  // Opens or creates `path` (its directory must exist), calls `replay` for
  // every valid record in order, truncates an invalid tail, and leaves the
  // log ready to append. FAILED_PRECONDITION when the file is not a log
  // (bad magic); INTERNAL for I/O errors (naming the path).
  static absl::StatusOr<std::unique_ptr<Wal>> Open(
      const std::string& path,
      const std::function<void(absl::string_view)>& replay,
      WalRecovery* recovery);

  ~Wal();
  Wal(const Wal&) = delete;
  Wal& operator=(const Wal&) = delete;

  // Appends one record and makes it durable. INVALID_ARGUMENT when it is
  // larger than kMaxRecordBytes; UNAVAILABLE when the write or sync failed
  // (a full disk) and the log was cut back to its last whole record: the
  // record was not written, and a later Append may succeed; INTERNAL when
  // even that failed: the log is broken until a restart.
  absl::Status Append(absl::string_view payload);

  // Replaces the log's records with `rewrite(records)`, in that order.
  // Appends wait meanwhile; those that arrive during the rewrite land after
  // it. On an error before the rename the log is unchanged (the error says
  // what failed); after it, the log is broken like after a failed Append.
  absl::Status Compact(
      const std::function<std::vector<std::string>(std::vector<std::string>)>&
          rewrite);

  // Compact without the records in memory: `rewrite(for_each, emit)` walks
  // the log's records with for_each(fn), which calls fn on each, in order
  // (the view is valid only during that call; walk as often as needed), and
  // writes the new log's records, in order, with emit. for_each and emit
  // return I/O errors (and emit INVALID_ARGUMENT for a record over
  // kMaxRecordBytes); any error, whether `rewrite` passes it on or not,
  // fails the compaction and leaves the log as Compact says.
  using RecordFn = std::function<void(absl::string_view)>;
  using ForEachRecord = std::function<absl::Status(const RecordFn&)>;
  using EmitRecord = std::function<absl::Status(absl::string_view)>;
  absl::Status CompactStreaming(
      const std::function<absl::Status(const ForEachRecord& for_each,
                                       const EmitRecord& emit)>& rewrite);

  const std::string& path() const { return path_; }
  uint64_t size_bytes() const;

 private:
  Wal(std::string path, int fd, uint64_t size);

  // CompactStreaming, less the release of free memory.
  absl::Status RewriteLog(
      const std::function<absl::Status(const ForEachRecord& for_each,
                                       const EmitRecord& emit)>& rewrite);

  // Until the leader (the thread with syncing_ set) is done.
  void AwaitLeader() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  // Written only by the leader; read by the leader and the destructor.
  int fd_;

  // One caller of Append, waiting for the batch that holds its record.
  struct Writer {
    Wal* wal;
    bool done = false;  // guarded by wal->mu_
    absl::Status status;
  };

  // Truncates the file to `size_bytes` and syncs (the leader only).
  absl::Status RollBack(uint64_t size_bytes);

  mutable absl::Mutex mu_;
  std::string pending_ ABSL_GUARDED_BY(mu_);  // framed, not yet written
  // The callers whose records are in pending_, in order.
  std::vector<Writer*> pending_writers_ ABSL_GUARDED_BY(mu_);
  bool syncing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  uint64_t size_ ABSL_GUARDED_BY(mu_);
};

}  // namespace remat

#endif  // REMAT_PLANNER_SERVICE_WAL_H_
