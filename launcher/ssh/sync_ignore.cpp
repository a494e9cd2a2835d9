#include "launcher/ssh/sync_ignore.h"

#include <fnmatch.h>

#include <cstring>
#include <fstream>

namespace dtrain {

bool GlobMatch(const char* p, const char* s) {
  for (; *p; ++p, ++s) {
    if (*p == '*') {
      if (p[1] == '*') {
        p += 2;
        if (*p == '/') {  // "**/": zero or more whole folders
          ++p;
          for (const char* t = s;;) {
            if (GlobMatch(p, t)) return true;
            t = std::strchr(t, '/');
            if (!t) return false;
            ++t;
          }
        }
        for (const char* t = s;; ++t) {  // "**" elsewhere: anything, '/' included
          if (GlobMatch(p, t)) return true;
          if (!*t) return false;
        }
      }
      for (const char* t = s;; ++t) {
        if (GlobMatch(p + 1, t)) return true;
        if (!*t || *t == '/') return false;
      }
    }
    if (!*s) return false;
    if (*p == '?') {
      if (*s == '/') return false;
      continue;
    }
    if (*p == '[') {
      const char* close = std::strchr(p + 1, ']');
      if (close) {
        const std::string cls(p, close + 1);
        const char one[2] = {*s, '\0'};
        if (*s == '/' || fnmatch(cls.c_str(), one, 0) != 0) return false;
        p = close;
        continue;
      }
    }
    if (*p == '\\' && p[1]) ++p;
    if (*p != *s) return false;
  }
  return !*s;
}

void SyncIgnore::ReadFolder(const std::string& dir, const std::string& relative) {
  const std::string base = relative.empty() ? "" : relative + "/";
  for (const char* name : {".gitignore", ".dtrainignore"}) {
    std::ifstream in(dir + "/" + name);
    std::string line;
    while (std::getline(in, line)) {
      while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
      if (line.empty() || line[0] == '#') continue;
      Rule rule;
      rule.base = base;
      if (line[0] == '!') {
        rule.negated = true;
        line.erase(0, 1);
      } else if (line[0] == '\\') {
        line.erase(0, 1);
      }
      if (!line.empty() && line.back() == '/') {
        rule.dir_only = true;
        line.pop_back();
      }
      rule.anchored = line.find('/') != std::string::npos;
      if (!line.empty() && line[0] == '/') line.erase(0, 1);
      if (line.empty()) continue;
      rule.pattern = line;
      rules_.push_back(rule);
    }
  }
}

bool SyncIgnore::Ignored(const std::string& path, bool is_dir) const {
  const std::string name = path.substr(path.rfind('/') + 1);
  if (name == ".git" || name.rfind(".dtrain-sync", 0) == 0) return true;
  bool ignored = false;
  for (const Rule& rule : rules_) {
    if (rule.dir_only && !is_dir) continue;
    if (path.compare(0, rule.base.size(), rule.base) != 0) continue;
    const std::string below = path.substr(rule.base.size());
    const bool match = rule.anchored ? GlobMatch(rule.pattern.c_str(), below.c_str())
                                     : GlobMatch(rule.pattern.c_str(), name.c_str());
    if (match) ignored = !rule.negated;
  }
  return ignored;
}

}  // namespace dtrain
