// HTA's answers kept for the next test that asks the same question. HolisticTraceAnalysis is
// deterministic, and CI asks it everything twice: the normal build's tests, then the sanitizer
// build's, on traces cut alike (about four minutes of HTA in the second pass). What a
// tests/kineto script printed is kept under <source>/.cache/hta (ignored by git: a fresh clone
// has none, so every CI run runs HTA once), named by a hash of: the environment it ran with, every
// tests/kineto/*.py, the installed HTA's version, and the arguments with each one that names a
// file or folder replaced by its content (names and bytes, a gzipped file's uncompressed); those
// paths are written in the kept text as placeholders, so that a run in another scratch folder
// reads its own paths back. A script given a path that is not there yet writes to it, and its
// answer is not kept.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/support/files.h"
#include "tests/support/gzip_text.h"

namespace dtrain::test {

class HtaAnswers {
 public:
  // The question: tests/kineto/`script` run with `args` and the environment `env` ("NAME=value
  // ..."), in the project's .venv under `source_dir`.
  HtaAnswers(const std::string& source_dir, const std::string& env, const std::string& script,
             const std::string& args)
      : dir_(source_dir + "/.cache/hta") {
    namespace fs = std::filesystem;
    Add("env", env);
    Add("script", script);
    std::vector<fs::path> scripts;
    for (const auto& e : fs::directory_iterator(source_dir + "/tests/kineto")) {
      if (e.path().extension() == ".py") scripts.push_back(e.path());
    }
    std::sort(scripts.begin(), scripts.end());
    for (const fs::path& p : scripts) Add(p.filename().string(), testing::ReadFile(p.string()));
    std::error_code ec;
    for (const auto& lib : fs::directory_iterator(source_dir + "/.venv/lib", ec)) {
      for (const auto& e : fs::directory_iterator(lib.path() / "site-packages", ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("holistictraceanalysis-", 0) == 0) Add("hta", name);
      }
    }
    std::istringstream words(args);
    for (std::string word; words >> word;) {
      if (word.size() > 1 && word[0] == '/') {
        // A path not there yet is one the script writes to (hta_counters.py --as-read): what it
        // writes is part of its answer, so the answer is not kept.
        keep_ = keep_ && fs::exists(word);
        paths_.push_back(word);
        AddPath(word);
      } else {
        Add("arg", word);
      }
    }
    char name[40];
    std::snprintf(name, sizeof(name), "%016llx%016llx", static_cast<unsigned long long>(a_),
                  static_cast<unsigned long long>(b_));
    file_ = dir_ + "/" + name + ".txt";
  }

  // What the script printed the last time, with this run's paths; none if never.
  std::optional<std::string> Kept() const {
    std::ifstream in(file_, std::ios::binary);
    if (!keep_ || !in) return std::nullopt;
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t i = 0; i < paths_.size(); ++i) ReplaceAll(text, Placeholder(i), paths_[i]);
    return text;
  }

  // Keeps what a run that succeeded printed (written whole, then renamed: two tests at once).
  void Keep(std::string text) const {
    if (!keep_) return;
    std::vector<size_t> longest_first(paths_.size());
    for (size_t i = 0; i < paths_.size(); ++i) longest_first[i] = i;
    std::sort(longest_first.begin(), longest_first.end(),
              [&](size_t x, size_t y) { return paths_[x].size() > paths_[y].size(); });
    for (size_t i : longest_first) ReplaceAll(text, paths_[i], Placeholder(i));
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    const std::string part = file_ + ".part" + std::to_string(::getpid());
    std::ofstream(part, std::ios::binary) << text;
    std::filesystem::rename(part, file_, ec);
  }

 private:
  static std::string Placeholder(size_t i) {
    return "<dtrain-test-path-" + std::to_string(i) + ">";
  }
  static void ReplaceAll(std::string& text, const std::string& from, const std::string& to) {
    for (size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size()) {
      text.replace(at, from.size(), to);
    }
  }
  // Two 64-bit FNV-1a hashes of different seeds, each field length-prefixed.
  void Add(const std::string& label, const std::string& bytes) {
    for (const std::string* s : {&label, &bytes}) {
      const std::string size = std::to_string(s->size()) + ":";
      for (const std::string* part : {&size, s}) {
        for (unsigned char c : *part) {
          a_ = (a_ ^ c) * 0x100000001b3ULL;
          b_ = (b_ ^ c) * 0x100000001b3ULL;
          b_ ^= b_ >> 29;
        }
      }
    }
  }
  // A file's or a folder's content: names, and each file's text uncompressed (gzip_text.h), as
  // the cases are cut afresh by every test and a gzip header holds the time it was written.
  void AddPath(const std::string& path) {
    namespace fs = std::filesystem;
    if (!fs::exists(path)) return;
    if (!fs::is_directory(path)) {
      Add("file", Gunzip(path));
      return;
    }
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(path)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      Add("name", fs::relative(f, path).string());
      Add("file", Gunzip(f.string()));
    }
  }

  std::string dir_, file_;
  std::vector<std::string> paths_;  // the arguments that are paths, in order
  bool keep_ = true;
  uint64_t a_ = 0xcbf29ce484222325ULL, b_ = 0x84222325cbf29ce4ULL;
};

}  // namespace dtrain::test
