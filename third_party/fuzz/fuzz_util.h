// Helpers for fuzz targets: a private temporary directory removed when the
// process exits, and files written into it from fuzz inputs.
#ifndef REMAT_THIRD_PARTY_FUZZ_FUZZ_UTIL_H_
#define REMAT_THIRD_PARTY_FUZZ_FUZZ_UTIL_H_

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace remat {
namespace fuzz {

// One directory per process, in /dev/shm when there is one (fast: WAL
// targets sync), else $TMPDIR or /tmp. Emptied and removed at exit; every
// input's files should still be removed by the target itself.
class TempDir {
 public:
  static const std::string& Path() {
    static TempDir dir;
    return dir.path_;
  }

  // Removes every file in the directory (not recursive: targets make none).
  static void Clear() {
    const std::string& path = Path();
    DIR* d = ::opendir(path.c_str());
    if (d == nullptr) return;
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      ::unlink((path + "/" + name).c_str());
    }
    ::closedir(d);
  }

 private:
  TempDir() {
    std::string base = "/dev/shm";
    struct stat st;
    if (::stat(base.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        ::access(base.c_str(), W_OK) != 0) {
      const char* tmp = std::getenv("TMPDIR");
      base = tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp";
    }
    std::string templ = base + "/remat-fuzz.XXXXXX";
    if (::mkdtemp(&templ[0]) == nullptr) {
      std::perror("remat fuzz: mkdtemp");
      std::abort();
    }
    path_ = templ;
  }
  ~TempDir() {
    Clear();
    ::rmdir(path_.c_str());
  }

  std::string path_;
};

// Writes `size` bytes to `path` (replacing it); aborts on failure.
inline void WriteFileOrDie(const std::string& path, const void* data,
                           size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr ||
      (size > 0 && std::fwrite(data, 1, size, f) != size) ||
      std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
}

// Aborts with a message when `cond` is false: a fuzz invariant.
#define REMAT_FUZZ_CHECK(cond)                                         \
  do {                                                                 \
    if (!(cond)) {                                                     \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n",       \
                   __FILE__, __LINE__, #cond);                         \
      std::abort();                                                    \
    }                                                                  \
  } while (0)

}  // namespace fuzz
}  // namespace remat

#endif  // REMAT_THIRD_PARTY_FUZZ_FUZZ_UTIL_H_
