#include "planner/service/wal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "planner/service/crc32c.h"

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
  const uint64_t my_seq = ++appended_seq_;
  while (synced_seq_ < my_seq && broken_.ok()) {
    if (syncing_) {
      // Another caller is writing; it or the next leader covers our record.
      AwaitLeader();
      continue;
    }
    // Become the leader: write everything pending with one sync.
    syncing_ = true;
    std::string batch;
    batch.swap(pending_);
    const uint64_t batch_seq = appended_seq_;
    mu_.Unlock();
    absl::Status s = WriteAll(fd_, batch.data(), batch.size());
    if (s.ok() && ::fdatasync(fd_) != 0) {
      s = absl::InternalError(
          absl::StrCat("fdatasync: ", std::strerror(errno)));
    }
    mu_.Lock();
    syncing_ = false;
    if (s.ok()) {
      synced_seq_ = batch_seq;
      size_ += batch.size();
    } else {
      broken_ = absl::InternalError(
          absl::StrCat("write-ahead log ", path_, " failed (", s.message(),
                       "); restart rematd to recover"));
    }
  }
  if (synced_seq_ >= my_seq) return absl::OkStatus();
  return broken_;
}

void Wal::AwaitLeader() {
  mu_.Await(absl::Condition(
      +[](bool* syncing) { return !*syncing; }, &syncing_));
}

absl::Status Wal::Compact(
    const std::function<std::vector<std::string>(std::vector<std::string>)>&
        rewrite) {
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
    std::string data(size, '\0');
    for (size_t done = 0; done < size;) {
      const ssize_t r = ::pread(fd_, data.data() + done, size - done,
                                static_cast<off_t>(done));
      if (r <= 0) return IoError("cannot read", path_);
      done += static_cast<size_t>(r);
    }
    std::vector<std::string> records;
    WalRecovery ignored;
    ParseRecords(
        data, [&](absl::string_view p) { records.emplace_back(p); }, &ignored);
    std::string out(kMagic, sizeof(kMagic));
    for (const std::string& p : rewrite(std::move(records))) Frame(p, &out);
    new_fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (new_fd < 0) return IoError("cannot create", tmp);
    if (auto w = WriteAll(new_fd, out.data(), out.size()); !w.ok()) {
      return absl::InternalError(absl::StrCat(tmp, ": ", w.message()));
    }
    if (::fdatasync(new_fd) != 0) return IoError("cannot sync", tmp);
    new_size = out.size();
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
