// "did you mean --nproc-per-node?": the nearest of the known words to a mistyped one.
#pragma once

#include <string>
#include <vector>

namespace dtrain {

// The candidate closest to `word` by edit distance, when close enough to be a typo (at most a
// third of the word's length, at least 1 and at most 3 edits), else "".
std::string ClosestWord(const std::string& word, const std::vector<std::string>& candidates);

// " (did you mean X?)" for ClosestWord, or "".
std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace dtrain
