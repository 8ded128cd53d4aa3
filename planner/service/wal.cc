#include "planner/service/wal.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "planner/service/crc32c.h"

// gperftools' tcmalloc, when the program is linked with it
// (//third_party:tcmalloc); a null address otherwise.
extern "C" void MallocExtension_ReleaseFreeMemory(void) __attribute__((weak));

namespace remat {
namespace {

constexpr char kMagic[8] = {'R', 'M', 'T', 'W', 'A', 'L', '0', '1'};
constexpr size_t kHeaderBytes = 8;  // length + checksum

void PutU32(uint32_t v, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

uint32_t GetU32(const char* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    v |= static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  }
  return v;
}

absl::Status IoError(const std::string& what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::Status WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("write: ", std::strerror(errno)));
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

absl::Status ReadFile(int fd, const std::string& path, std::string* out) {
  out->clear();
  char buf[1 << 16];
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof(buf));
    if (r < 0) {
      if (errno == EINTR) continue;
      return IoError("cannot read", path);
    }
    if (r == 0) return absl::OkStatus();
    out->append(buf, static_cast<size_t>(r));
  }
}

// Makes a newly created file's directory entry durable.
void SyncParentDir(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : path.substr(0, slash);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

// Calls `replay` for each valid record after the magic, in order; returns
// the length of the valid prefix and counts records in `recovery` (setting
// dropped_reason when it stops early).
uint64_t ParseRecords(const std::string& data,
                      const std::function<void(absl::string_view)>& replay,
                      WalRecovery* recovery) {
  uint64_t valid = sizeof(kMagic);
  size_t pos = valid;
  while (pos < data.size()) {
    if (data.size() - pos < kHeaderBytes) {
      recovery->dropped_reason = "torn record header";
      break;
    }
    const uint32_t length = GetU32(data.data() + pos);
    const uint32_t crc = GetU32(data.data() + pos + 4);
    if (length > Wal::kMaxRecordBytes) {
      recovery->dropped_reason =
          absl::StrCat("record length ", length, " exceeds the maximum");
      break;
    }
    if (data.size() - pos - kHeaderBytes < length) {
      recovery->dropped_reason = "torn record (shorter than its length)";
      break;
    }
    uint32_t actual = Crc32c(0, data.data() + pos, 4);
    actual = Crc32c(actual, data.data() + pos + kHeaderBytes, length);
    if (actual != crc) {
      recovery->dropped_reason = "checksum mismatch";
      break;
    }
    replay(absl::string_view(data.data() + pos + kHeaderBytes, length));
    ++recovery->records;
    pos += kHeaderBytes + length;
    valid = pos;
  }
  return valid;
}

// Appends one framed record to `out`.
void Frame(absl::string_view payload, std::string* out) {
  char header[kHeaderBytes];
  PutU32(static_cast<uint32_t>(payload.size()), header);
  uint32_t crc = Crc32c(0, header, 4);
  crc = Crc32c(crc, payload.data(), payload.size());
  PutU32(crc, header + 4);
  out->append(header, kHeaderBytes);
  out->append(payload.data(), payload.size());
}

// What compaction reads and writes through at a time.
constexpr size_t kCompactionBufferBytes = 256 << 10;

// The valid records of the first `size` bytes of a log file, one at a time
// through a buffer (grown only for a record larger than it). Stops where
// ParseRecords stops.
class RecordReader {
 public:
  RecordReader(int fd, const std::string& path, uint64_t size)
      : fd_(fd), path_(path), size_(size), buf_(kCompactionBufferBytes, '\0') {}

  // The next record (valid until the next call) in *record: true; false at
  // the end or at an invalid record.
  absl::StatusOr<bool> Next(absl::string_view* record) {
    if (auto s = Fill(kHeaderBytes); !s.ok()) return s;
    if (end_ - begin_ < kHeaderBytes) return false;
    const uint32_t length = GetU32(buf_.data() + begin_);
    const uint32_t crc = GetU32(buf_.data() + begin_ + 4);
    if (length > Wal::kMaxRecordBytes) return false;
    if (auto s = Fill(kHeaderBytes + length); !s.ok()) return s;
    if (end_ - begin_ - kHeaderBytes < length) return false;
    const char* at = buf_.data() + begin_;
    uint32_t actual = Crc32c(0, at, 4);
    actual = Crc32c(actual, at + kHeaderBytes, length);
    if (actual != crc) return false;
    *record = absl::string_view(at + kHeaderBytes, length);
    begin_ += kHeaderBytes + length;
    return true;
  }

 private:
  // Until the buffer holds `need` bytes from begin_, or the rest of the
  // file when that is less.
  absl::Status Fill(size_t need) {
    if (end_ - begin_ >= need) return absl::OkStatus();
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    offset_ += begin_;
    end_ -= begin_;
    begin_ = 0;
    if (buf_.size() < need) buf_.resize(need);
    while (end_ < need && offset_ + end_ < size_) {
      const size_t want = static_cast<size_t>(
          std::min<uint64_t>(buf_.size() - end_, size_ - offset_ - end_));
      const ssize_t r = ::pread(fd_, buf_.data() + end_, want,
                                static_cast<off_t>(offset_ + end_));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return IoError("cannot read", path_);
      end_ += static_cast<size_t>(r);
    }
    return absl::OkStatus();
  }

  const int fd_;
  const std::string& path_;
  const uint64_t size_;
  std::string buf_;
  uint64_t offset_ = sizeof(kMagic);  // file offset of buf_[0]
  size_t begin_ = 0;                  // next record in buf_
  size_t end_ = 0;                    // bytes read into buf_
};

// Frames records into a buffer and writes it out whenever it is full.
class RecordWriter {
 public:
  RecordWriter(int fd, const std::string& path) : fd_(fd), path_(path) {
    buf_.reserve(kCompactionBufferBytes);
    buf_.append(kMagic, sizeof(kMagic));
  }

  absl::Status Append(absl::string_view payload) {
    if (payload.size() > Wal::kMaxRecordBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("write-ahead log record of ", payload.size(),
                       " bytes exceeds ", Wal::kMaxRecordBytes));
    }
    Frame(payload, &buf_);
    if (buf_.size() >= kCompactionBufferBytes) return Flush();
    return absl::OkStatus();
  }

  absl::Status Flush() {
    if (auto w = WriteAll(fd_, buf_.data(), buf_.size()); !w.ok()) {
      return absl::InternalError(absl::StrCat(path_, ": ", w.message()));
    }
    written_ += buf_.size();
    buf_.clear();
    if (buf_.capacity() > kCompactionBufferBytes) {
      std::string().swap(buf_);  // after a record larger than the buffer
      buf_.reserve(kCompactionBufferBytes);
    }
    return absl::OkStatus();
  }

  uint64_t written() const { return written_; }

 private:
  const int fd_;
  const std::string& path_;
  std::string buf_;
  uint64_t written_ = 0;
};

// Hands memory the allocator holds free back to the system (see wal.h).
void ReleaseFreeMemory() {
  if (MallocExtension_ReleaseFreeMemory != nullptr) {
    MallocExtension_ReleaseFreeMemory();
  } else {
    ::malloc_trim(0);  // glibc's malloc
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Wal>> Wal::Open(
    const std::string& path,
    const std::function<void(absl::string_view)>& replay,
    WalRecovery* recovery) {
  *recovery = WalRecovery{};
  struct stat st;
  const bool existed = ::stat(path.c_str(), &st) == 0;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return IoError("cannot open write-ahead log", path);
  if (!existed) SyncParentDir(path);

  std::string data;
  if (auto s = ReadFile(fd, path, &data); !s.ok()) {
    ::close(fd);
    return s;
  }

  uint64_t valid = 0;
  if (data.size() >= sizeof(kMagic)) {
    if (std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0) {
      ::close(fd);
      return absl::FailedPreconditionError(absl::StrCat(
          path,
          " is not a rematd write-ahead log (bad magic); move it away "
          "or point --state-dir elsewhere"));
    }
    valid = ParseRecords(data, replay, recovery);
  } else if (!data.empty()) {
    recovery->dropped_reason = "torn file header";
  }

  recovery->valid_bytes = valid;
  recovery->dropped_bytes = data.size() - valid;
  if (valid == 0) {
    // New (or torn at creation): write the magic.
    if (::ftruncate(fd, 0) != 0 || ::lseek(fd, 0, SEEK_SET) != 0) {
      ::close(fd);
      return IoError("cannot reset", path);
    }
    if (auto s = WriteAll(fd, kMagic, sizeof(kMagic)); !s.ok()) {
      ::close(fd);
      return absl::InternalError(absl::StrCat(path, ": ", s.message()));
    }
    valid = sizeof(kMagic);
    recovery->valid_bytes = valid;
  } else if (recovery->dropped_bytes > 0) {
    if (::ftruncate(fd, static_cast<off_t>(valid)) != 0) {
      ::close(fd);
      return IoError("cannot truncate the corrupt tail of", path);
    }
  }
  if (::fdatasync(fd) != 0) {
    ::close(fd);
    return IoError("cannot sync", path);
  }
  if (::lseek(fd, static_cast<off_t>(valid), SEEK_SET) < 0) {
    ::close(fd);
    return IoError("cannot seek", path);
  }
  return std::unique_ptr<Wal>(new Wal(path, fd, valid));
}

Wal::Wal(std::string path, int fd, uint64_t size)
    : path_(std::move(path)), fd_(fd), size_(size) {}

Wal::~Wal() {
  // Every acknowledged record is already synced; nothing to flush.
  ::close(fd_);
}

uint64_t Wal::size_bytes() const {
  absl::MutexLock lock(&mu_);
  return size_;
}

absl::Status Wal::Append(absl::string_view payload) {
  if (payload.size() > kMaxRecordBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("write-ahead log record of ", payload.size(),
                     " bytes exceeds ", kMaxRecordBytes));
  }
  absl::MutexLock lock(&mu_);
  if (!broken_.ok()) return broken_;
  Frame(payload, &pending_);
  Writer me{this};
  pending_writers_.push_back(&me);
  while (!me.done) {
    if (syncing_) {
      // Another caller is writing; it or the next leader covers our record.
      mu_.Await(absl::Condition(
          +[](Writer* w) { return w->done || !w->wal->syncing_; }, &me));
      continue;
    }
    // Become the leader: write everything pending with one sync.
    syncing_ = true;
    std::string batch;
    batch.swap(pending_);
    std::vector<Writer*> writers;
    writers.swap(pending_writers_);
    const uint64_t good_bytes = size_;
    mu_.Unlock();
    absl::Status s = WriteAll(fd_, batch.data(), batch.size());
    if (s.ok() && ::fdatasync(fd_) != 0) {
      s = absl::InternalError(
          absl::StrCat("fdatasync: ", std::strerror(errno)));
    }
    if (!s.ok()) {
      // A full disk, or another write error: cut the file back to the last
      // synced record, so that the log stays whole records and appends
      // succeed again once space returns. No record of this batch was
      // acknowledged; each of its callers gets the error.
      const absl::Status cut = RollBack(good_bytes);
      s = cut.ok() ? absl::UnavailableError(absl::StrCat(
                         "write-ahead log ", path_, ": ", s.message(),
                         " (nothing written; retry)"))
                   : absl::InternalError(absl::StrCat(
                         "write-ahead log ", path_, " failed (", s.message(),
                         "; then ", cut.message(),
                         "); restart rematd to recover"));
    }
    mu_.Lock();
    syncing_ = false;
    if (s.ok()) size_ += batch.size();
    if (absl::IsInternal(s)) broken_ = s;
    for (Writer* w : writers) {
      w->status = s;
      w->done = true;
    }
  }
  return me.status;
}

absl::Status Wal::RollBack(uint64_t size_bytes) {
  if (::ftruncate(fd_, static_cast<off_t>(size_bytes)) != 0) {
    return IoError("cannot truncate", path_);
  }
  if (::lseek(fd_, static_cast<off_t>(size_bytes), SEEK_SET) < 0) {
    return IoError("cannot seek", path_);
  }
  if (::fdatasync(fd_) != 0) return IoError("cannot sync", path_);
  return absl::OkStatus();
}

void Wal::AwaitLeader() {
  mu_.Await(absl::Condition(
      +[](bool* syncing) { return !*syncing; }, &syncing_));
}

absl::Status Wal::Compact(
    const std::function<std::vector<std::string>(std::vector<std::string>)>&
        rewrite) {
  return CompactStreaming(
      [&](const ForEachRecord& for_each, const EmitRecord& emit) {
        std::vector<std::string> records;
        if (auto s = for_each(
                [&](absl::string_view p) { records.emplace_back(p); });
            !s.ok()) {
          return s;
        }
        for (const std::string& p : rewrite(std::move(records))) {
          if (auto s = emit(p); !s.ok()) return s;
        }
        return absl::OkStatus();
      });
}

absl::Status Wal::CompactStreaming(
    const std::function<absl::Status(const ForEachRecord& for_each,
                                     const EmitRecord& emit)>& rewrite) {
  const absl::Status s = RewriteLog(rewrite);
  ReleaseFreeMemory();
  return s;
}

absl::Status Wal::RewriteLog(
    const std::function<absl::Status(const ForEachRecord& for_each,
                                     const EmitRecord& emit)>& rewrite) {
  absl::MutexLock lock(&mu_);
  if (!broken_.ok()) return broken_;
  // Become the leader, so that nothing writes the file meanwhile; records
  // appended meanwhile wait in pending_ for the next leader.
  AwaitLeader();
  syncing_ = true;
  const uint64_t size = size_;
  mu_.Unlock();

  const std::string tmp = path_ + ".compact";
  uint64_t new_size = 0;
  int new_fd = -1;
  absl::Status s = [&]() -> absl::Status {
    new_fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (new_fd < 0) return IoError("cannot create", tmp);
    RecordWriter writer(new_fd, tmp);
    // The first error of a walk or an emit, which fails the compaction even
    // if `rewrite` drops it.
    absl::Status io;
    const ForEachRecord for_each = [&](const RecordFn& fn) -> absl::Status {
      if (!io.ok()) return io;
      RecordReader reader(fd_, path_, size);
      absl::string_view record;
      for (;;) {
        absl::StatusOr<bool> next = reader.Next(&record);
        if (!next.ok()) return io = next.status();
        if (!*next) return absl::OkStatus();
        fn(record);
      }
    };
    const EmitRecord emit = [&](absl::string_view payload) -> absl::Status {
      if (!io.ok()) return io;
      return io = writer.Append(payload);
    };
    if (auto r = rewrite(for_each, emit); !r.ok()) return r;
    if (!io.ok()) return io;
    if (auto w = writer.Flush(); !w.ok()) return w;
    if (::fdatasync(new_fd) != 0) return IoError("cannot sync", tmp);
    new_size = writer.written();
    return absl::OkStatus();
  }();
  if (s.ok() && ::rename(tmp.c_str(), path_.c_str()) != 0) {
    s = IoError("cannot rename the compacted log over", path_);
  }
  if (!s.ok()) {
    if (new_fd >= 0) ::close(new_fd);
    ::unlink(tmp.c_str());
    mu_.Lock();
    syncing_ = false;
    return s;
  }
  SyncParentDir(path_);
  ::close(fd_);
  fd_ = new_fd;
  const bool at_end = ::lseek(fd_, 0, SEEK_END) >= 0;
  mu_.Lock();
  syncing_ = false;
  size_ = new_size;
  if (!at_end) {
    broken_ = absl::InternalError(absl::StrCat(
        "write-ahead log ", path_, " cannot seek after compaction (",
        std::strerror(errno), "); restart rematd to recover"));
    return broken_;
  }
  return absl::OkStatus();
}

}  // namespace remat
