// SyncIgnore: which files of a workdir `dtrain sync` leaves out: .git/, dtrain's own sync files,
// and what .gitignore and .dtrainignore files say (in the root and any folder below, gitignore
// syntax: # comments, !negation, trailing / for folders, leading or inner / anchors to the
// file's folder, * ? [..] within one path part, ** across parts; the last matching rule wins).
#pragma once

#include <string>
#include <vector>

namespace dtrain {

class SyncIgnore {
 public:
  // Reads `dir`/.gitignore and `dir`/.dtrainignore if present; `relative` is dir's path from
  // the workdir root ("" for the root). Call for each folder before looking at its entries.
  void ReadFolder(const std::string& dir, const std::string& relative);
  // `path` relative to the root ("src/a.py").
  bool Ignored(const std::string& path, bool is_dir) const;

 private:
  struct Rule {
    std::string base;     // folder the rule's file is in, "" or "src/"
    std::string pattern;  // without !, leading and trailing /
    bool negated = false;
    bool dir_only = false;
    bool anchored = false;  // matched against the path below base, else against the last part
  };
  std::vector<Rule> rules_;
};

// gitignore glob: * and ? never cross '/', ** does, [...] classes.
bool GlobMatch(const char* pattern, const char* text);

}  // namespace dtrain
