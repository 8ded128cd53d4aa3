// A stand-in for libFuzzer's main, for builds without -fsanitize=fuzzer (the
// default g++ build, which `bazel test //...` runs): feeds the target every
// file of the corpus paths it is given, then a bounded number of
// deterministic mutations of them (bit flips, byte edits, truncations,
// insertions, splices), so CI exercises each target on every run.
//
//   <fuzzer> [-runs=N] [-seed=S] [-max_len=L] PATH...
//
// PATH is a file or a directory (read recursively); N is the number of
// mutated inputs (default 2000), S the generator's seed (default 1). Other
// libFuzzer flags are accepted and ignored. Prints "Done N runs" at the end,
// like libFuzzer; a crash is the target's abort.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc,
                                                          char*** argv);

namespace {

struct Rng {
  uint64_t state;
  uint64_t Next() {  // splitmix64
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return n == 0 ? 0 : Next() % n; }
};

void CollectFiles(const std::string& path, std::vector<std::string>* out) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "fuzz_driver: cannot stat %s\n", path.c_str());
    std::exit(2);
  }
  if (!S_ISDIR(st.st_mode)) {
    out->push_back(path);
    return;
  }
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    names.push_back(e->d_name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());  // deterministic order
  for (const std::string& n : names) CollectFiles(path + "/" + n, out);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

void Run(const std::string& input) {
  // A copy in its own allocation, so reads past the end are caught by
  // whatever memory checker runs the driver.
  std::vector<uint8_t> copy(input.begin(), input.end());
  LLVMFuzzerTestOneInput(copy.empty() ? nullptr : copy.data(), copy.size());
}

const char* const kInteresting[] = {"0",    "-1",  "\xff\xff\xff\xff", "\x7f",
                                    "\x80", ",",   "\n",               "\"",
                                    "{",    "}",   "[",                "]",
                                    ":",    "1e308", "NaN",            " ",
                                    "\0",   "18446744073709551615"};

void Mutate(Rng* rng, const std::vector<std::string>& seeds, size_t max_len,
            std::string* s) {
  const int edits = 1 + static_cast<int>(rng->Below(4));
  for (int k = 0; k < edits; ++k) {
    switch (rng->Below(8)) {
      case 0:  // flip a bit
        if (!s->empty()) {
          (*s)[rng->Below(s->size())] ^= static_cast<char>(1u << rng->Below(8));
        }
        break;
      case 1:  // set a byte
        if (!s->empty()) {
          (*s)[rng->Below(s->size())] = static_cast<char>(rng->Next());
        }
        break;
      case 2:  // truncate
        s->resize(rng->Below(s->size() + 1));
        break;
      case 3:  // erase a range
        if (!s->empty()) {
          const size_t pos = rng->Below(s->size());
          s->erase(pos, 1 + rng->Below(std::min<size_t>(16, s->size() - pos)));
        }
        break;
      case 4:  // insert random bytes
      {
        const size_t pos = rng->Below(s->size() + 1);
        const size_t n = 1 + rng->Below(8);
        std::string bytes;
        for (size_t i = 0; i < n; ++i) bytes += static_cast<char>(rng->Next());
        s->insert(pos, bytes);
        break;
      }
      case 5:  // insert an interesting token
      {
        const char* t = kInteresting[rng->Below(std::size(kInteresting))];
        const size_t len = t[0] == '\0' ? 1 : std::strlen(t);
        s->insert(rng->Below(s->size() + 1), std::string(t, len));
        break;
      }
      case 6:  // splice with another seed
      {
        const std::string& other = seeds[rng->Below(seeds.size())];
        const size_t cut = rng->Below(s->size() + 1);
        const size_t from = rng->Below(other.size() + 1);
        *s = s->substr(0, cut) + other.substr(from);
        break;
      }
      case 7:  // duplicate a chunk
        if (!s->empty()) {
          const size_t pos = rng->Below(s->size());
          const size_t n = 1 + rng->Below(std::min<size_t>(64, s->size() - pos));
          s->insert(rng->Below(s->size() + 1), s->substr(pos, n));
        }
        break;
    }
  }
  if (s->size() > max_len) s->resize(max_len);
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  long runs = 2000;
  uint64_t seed = 1;
  size_t max_len = 1 << 16;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("-runs=", 0) == 0) {
      runs = std::strtol(arg.c_str() + 6, nullptr, 10);
    } else if (arg.rfind("-seed=", 0) == 0) {
      seed = std::strtoull(arg.c_str() + 6, nullptr, 10);
    } else if (arg.rfind("-max_len=", 0) == 0) {
      max_len = std::strtoull(arg.c_str() + 9, nullptr, 10);
    } else if (arg.rfind("-", 0) == 0) {
      // Another libFuzzer flag: meaningless here.
    } else {
      CollectFiles(arg, &files);
    }
  }
  std::vector<std::string> seeds;
  seeds.reserve(files.size());
  for (const std::string& f : files) seeds.push_back(ReadFile(f));
  long done = 0;
  Run("");
  ++done;
  for (const std::string& s : seeds) {
    Run(s);
    ++done;
  }
  if (seeds.empty()) seeds.push_back("");
  Rng rng{seed};
  for (long i = 0; i < runs; ++i) {
    std::string input = seeds[rng.Below(seeds.size())];
    Mutate(&rng, seeds, max_len, &input);
    Run(input);
    ++done;
  }
  std::printf("fuzz_driver: %zu seed files, %ld mutations\nDone %ld runs\n",
              seeds.size(), runs, done);
  return 0;
}
